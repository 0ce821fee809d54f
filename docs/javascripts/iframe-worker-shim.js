// Search on the site opened from disk (file://). Chromium refuses Web Workers on file:// pages,
// and Material's search runs in one; Material's offline plugin fetches a shim for this from a
// CDN, which an offline machine cannot reach. This one, ours, runs the worker's script in a
// hidden same-origin frame instead: messages go in as events on the frame, and the frame's
// postMessage comes back as events on this object. (The file name contains "iframe-worker" so
// that the offline plugin does not add its CDN shim.)
(() => {
  if (location.protocol !== "file:") return;

  class FrameWorker extends EventTarget {
    constructor(url) {
      super();
      const frame = document.createElement("iframe");
      frame.hidden = true;
      (document.body || document.documentElement).appendChild(frame);
      const scope = frame.contentWindow;
      scope.postMessage = (data) =>
        setTimeout(() => this.dispatchEvent(new MessageEvent("message", { data })));
      this.scope = scope;
      this.ready = new Promise((resolve, reject) => {
        const script = scope.document.createElement("script");
        script.src = new URL(url, location.href).href;
        script.onload = resolve;
        script.onerror = reject;
        scope.document.head.appendChild(script);
      });
    }

    postMessage(data) {
      this.ready.then(() => this.scope.dispatchEvent(new MessageEvent("message", { data })));
    }

    terminate() {}
  }

  window.Worker = FrameWorker;
})();
