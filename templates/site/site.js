/* The index's filters and sort (templates/site/index.html.j2); task pages have no #matrix and
   use none of it. No framework, no network: the page opens from the file system. */
(function () {
  "use strict";
  var table = document.getElementById("matrix");
  var form = document.getElementById("filters");
  if (!table || !form) {
    return;
  }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  rows.forEach(function (row, i) { row.setAttribute("data-order", i); });
  var count = document.getElementById("count");

  function value(name) {
    return form.elements[name].value;
  }

  function shown(row) {
    if (value("area") && row.getAttribute("data-area") !== value("area")) {
      return false;
    }
    if (value("split") && row.getAttribute("data-split") !== value("split")) {
      return false;
    }
    var outcome = value("outcome"), mode = value("mode");
    if (!outcome) {
      return true;
    }
    var cells = row.querySelectorAll("td[data-mode]");
    for (var i = 0; i < cells.length; i++) {
      if ((!mode || cells[i].getAttribute("data-mode") === mode) &&
          cells[i].getAttribute("data-outcome") === outcome) {
        return true;
      }
    }
    return false;
  }

  function order(a, b) {
    if (value("sort") === "disagree") {
      var d = Number(b.getAttribute("data-disagree")) - Number(a.getAttribute("data-disagree"));
      if (d) {
        return d;
      }
    }
    return Number(a.getAttribute("data-order")) - Number(b.getAttribute("data-order"));
  }

  function apply() {
    var n = 0;
    rows.slice().sort(order).forEach(function (row) {
      row.hidden = !shown(row);
      n += row.hidden ? 0 : 1;
      body.appendChild(row);
    });
    count.textContent = n + " of " + rows.length + " tasks";
  }

  form.addEventListener("change", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  apply();
}());
