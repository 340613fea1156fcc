// Ombre Brain debug pages: row filtering and graph highlighting. Local only; no network requests.
(function () {
  "use strict";

  // <input data-filter="#table-id">: hide rows whose text does not contain the typed words.
  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.querySelector(input.getAttribute("data-filter"));
    if (!table) { return; }
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        var text = tr.textContent.toLowerCase();
        var keep = words.every(function (w) { return text.indexOf(w) !== -1; });
        tr.classList.toggle("hidden", !keep);
      });
    });
  });

  // <span data-columns="#table-id"> of checkboxes data-col="x": show or hide the cells of class c-x (remembered).
  document.querySelectorAll("[data-columns]").forEach(function (box) {
    var table = document.querySelector(box.getAttribute("data-columns"));
    if (!table) { return; }
    box.querySelectorAll("input[data-col]").forEach(function (input) {
      var col = input.getAttribute("data-col");
      var key = "ombre-columns:" + table.id + ":" + col;
      var apply = function () { table.classList.toggle("hide-" + col, !input.checked); };
      try { if (window.localStorage.getItem(key) === "hidden") { input.checked = false; } } catch (e) { /* private mode */ }
      apply();
      input.addEventListener("change", function () {
        apply();
        try { window.localStorage.setItem(key, input.checked ? "shown" : "hidden"); } catch (e) { /* private mode */ }
      });
    });
  });

  // Diffusion graph: hovering a node highlights its edges.
  var graph = document.getElementById("graph");
  if (graph) {
    graph.querySelectorAll("g.node").forEach(function (node) {
      var id = node.getAttribute("data-node");
      var edges = Array.prototype.filter.call(graph.querySelectorAll("g.edge"), function (e) {
        return e.getAttribute("data-from") === id || e.getAttribute("data-to") === id;
      });
      node.addEventListener("mouseenter", function () { edges.forEach(function (e) { e.classList.add("hl"); }); });
      node.addEventListener("mouseleave", function () { edges.forEach(function (e) { e.classList.remove("hl"); }); });
    });
  }
})();
