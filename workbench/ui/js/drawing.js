// The segment graph's drawing: Graphviz SVG in a viewport that pans (drag, wheel) and zooms
// (ctrl/cmd + wheel, the buttons); a click on a box sends its Graphviz name (the SVG <title>)
// to Python, which decides what it means (open a group, select a node or an engine).
const MAX_HEIGHT = 760; // px: the viewport never grows beyond this, the drawing pans inside
const LABEL_PX = 11; // boxes' labels are at least this tall on screen: Fit pans, never shrinks

function render({ model, el }) {
  el.classList.add("wb-drawing");
  const bar = document.createElement("div");
  bar.className = "wb-drawing-bar";
  const port = document.createElement("div");
  port.className = "wb-drawing-port";
  const stage = document.createElement("div");
  stage.className = "wb-drawing-stage";
  port.appendChild(stage);
  el.append(bar, port);
  let scale = 1, x = 0, y = 0, drag = null, moved = false, touched = false;

  const svg = () => stage.querySelector("svg");
  const size = () => {
    const s = svg();
    return s ? [s.width.baseVal.value, s.height.baseVal.value] : [0, 0];
  };
  const apply = () => {
    stage.style.transform = `translate(${x}px, ${y}px) scale(${scale})`;
    zoomLabel.textContent = `${Math.round(scale * 100)}%`;
  };
  const clamp = () => {  // keep some of the drawing in sight
    const [w, h] = size();
    x = Math.min(Math.max(x, port.clientWidth - w * scale - 40), 40);
    y = Math.min(Math.max(y, port.clientHeight - h * scale - 40), 40);
  };
  // The zoom at which the boxes' usual label (the median font size of the nodes' text, in
  // the SVG's units, times the px per unit the SVG is drawn at) is LABEL_PX tall.
  const readable = () => {
    const s = svg();
    const sizes = [...stage.querySelectorAll("g.node text")]
      .map((t) => parseFloat(t.getAttribute("font-size"))).filter((v) => v > 0)
      .sort((a, b) => a - b);
    const box = s?.viewBox?.baseVal;
    if (!sizes.length || !box?.width) return 1;
    const perUnit = s.width.baseVal.value / box.width;
    return LABEL_PX / (sizes[Math.floor(sizes.length / 2)] * perUnit);
  };
  const fit = () => {  // the whole width, or the readable zoom and the middle of it
    const [w, h] = size();
    if (!w) return;
    scale = Math.max(readable(), Math.min(1, (port.clientWidth || w) / w));
    port.style.height = `${Math.min(MAX_HEIGHT, Math.ceil(h * scale) + 4)}px`;
    x = ((port.clientWidth || w) - w * scale) / 2;
    y = 0;
    touched = false;
    apply();
  };
  const zoomAt = (factor, px, py) => {  // px, py: the point that stays put
    const next = Math.min(4, Math.max(0.05, scale * factor));
    x = px - (px - x) * (next / scale);
    y = py - (py - y) * (next / scale);
    scale = next;
    touched = true;
    clamp();
    apply();
  };
  const centre = (title) => {  // pans so the box named `title` sits in the middle
    const target = [...stage.querySelectorAll("g.node > title, g.cluster > title")]
      .find((t) => t.textContent === title);
    if (!target) return;
    const box = target.parentNode.getBoundingClientRect();
    const view = port.getBoundingClientRect();
    x += view.left + view.width / 2 - (box.left + box.width / 2);
    y += view.top + view.height / 2 - (box.top + box.height / 2);
    clamp();
    apply();
  };
  const button = (text, title, action) => {
    const b = document.createElement("button");
    b.textContent = text;
    b.title = title;
    b.className = "wb-drawing-button";
    b.addEventListener("click", action);
    bar.appendChild(b);
    return b;
  };
  button("Fit", "fit the drawing to the column, as far as labels stay readable (then pan)",
    () => { fit(); if (model.get("focus")) centre(model.get("focus")); });
  button("−", "zoom out", () => zoomAt(1 / 1.25, port.clientWidth / 2, port.clientHeight / 2));
  button("+", "zoom in", () => zoomAt(1.25, port.clientWidth / 2, port.clientHeight / 2));
  button("1:1", "full size", () => zoomAt(1 / scale, port.clientWidth / 2, 0));
  const zoomLabel = document.createElement("span");
  zoomLabel.className = "wb-drawing-zoom";
  const hint = document.createElement("span");
  hint.className = "wb-drawing-hint";
  hint.textContent = "drag or scroll to pan, ctrl + scroll to zoom; click a group to open it, "
    + "a group's frame title to close it, a node or an engine to select it";
  bar.append(zoomLabel, hint);

  const show = () => {
    stage.innerHTML = model.get("value");
    const drawn = !!svg();
    el.classList.toggle("wb-drawing-empty", !drawn);
    if (!drawn) {
      // A note in place of a drawing keeps the drawing's height: the page does not jump.
      if (port.clientHeight > 0 && !el.dataset.noted) port.style.minHeight = `${port.clientHeight}px`;
      el.dataset.noted = "1";
      port.style.height = "auto";
      stage.style.transform = "";
      return;
    }
    delete el.dataset.noted;
    port.style.minHeight = "";
    if (!touched || !port.clientHeight) {
      reset();
      return;
    }
    apply();  // a redraw after the user zoomed or panned keeps the zoom
    if (model.get("focus")) centre(model.get("focus"));
  };
  const reset = () => {  // a new drawing: fitted, but never smaller than readable
    fit();
    if (model.get("focus")) centre(model.get("focus"));
  };

  port.addEventListener("wheel", (e) => {
    if (!svg()) return;
    const r = port.getBoundingClientRect();
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      zoomAt(Math.exp(-e.deltaY / 300), e.clientX - r.left, e.clientY - r.top);
      return;
    }
    const before = [x, y];
    x -= e.deltaX;
    y -= e.deltaY;
    clamp();
    if (x !== before[0] || y !== before[1]) {  // at an edge the page scrolls instead
      e.preventDefault();
      touched = true;
      apply();
    }
  }, { passive: false });
  port.addEventListener("pointerdown", (e) => {
    if (!svg() || e.button !== 0) return;
    drag = [e.clientX - x, e.clientY - y, e.clientX, e.clientY];
    moved = false;
  });
  port.addEventListener("pointermove", (e) => {
    if (!drag) return;
    if (Math.abs(e.clientX - drag[2]) + Math.abs(e.clientY - drag[3]) > 4) moved = true;
    if (!moved) return;
    x = e.clientX - drag[0];
    y = e.clientY - drag[1];
    touched = true;
    clamp();
    apply();
  });
  const stop = () => { drag = null; };
  port.addEventListener("pointerup", stop);
  port.addEventListener("pointerleave", stop);
  port.addEventListener("click", (e) => {
    if (moved) { moved = false; return; }  // the end of a drag, not a click
    const node = e.target.closest("g.node");
    const cluster = node ? null : e.target.closest("g.cluster");
    if (cluster && e.target.tagName !== "text") return;  // a frame closes from its title only
    const title = (node || cluster)?.querySelector(":scope > title")?.textContent;
    if (title) model.send({ click: title });
  });

  model.on("change:value", show);
  model.on("change:focus", () => model.get("focus") && centre(model.get("focus")));
  show();
  // The tab may be hidden when first drawn (no width yet): fit once it shows.
  let width = 0;
  new ResizeObserver(() => {
    if (port.clientWidth === width) return;
    width = port.clientWidth;
    if (svg() && width && !touched) reset();
  }).observe(port);
}

export default { render };
