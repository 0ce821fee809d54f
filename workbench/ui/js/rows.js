// HTML with clickable table rows: a click on a body row of a `wb-rows-NAME` table sends
// {table: NAME, row: its index} to Python (a report row leads to its nodes in the graph).
function render({ model, el }) {
  const show = () => { el.innerHTML = model.get("value"); };
  el.addEventListener("click", (e) => {
    if (e.target.closest("details")) return; // a row's "more" opens in place
    const row = e.target.closest("table.wb-rows tbody tr");
    if (!row || !el.contains(row)) return;
    const table = row.closest("table");
    const name = [...table.classList].find((c) => c.startsWith("wb-rows-"));
    model.send({ table: name ? name.slice(8) : "", row: [...row.parentNode.children].indexOf(row) });
  });
  model.on("change:value", show);
  show();
}

export default { render };
