// Kairos execution page: follows the log while the execution may still
// write (no inline script: the Content-Security-Policy allows scripts from
// /ui/assets only). Every 2 s, while the tab is visible, it asks
// /ui/executions/<id>/tail for the lines after the last one shown and
// appends them (as text: nothing from a log line is parsed as HTML). It
// stops once the server says the execution ended and its last lines are in.
// The log box follows new lines while it is scrolled to its end.
(function () {
  "use strict";

  var box = document.querySelector("[data-tail]");
  if (!box || !window.fetch) return;
  var url = box.getAttribute("data-tail");
  var after = box.getAttribute("data-after") || "0";
  var body = document.getElementById("log-lines");
  var table = box.querySelector("table");
  var empty = document.getElementById("log-empty");
  var PERIOD = 2000;

  function banner(lost) {
    var b = document.getElementById("live-lost");
    if (b) b.hidden = !lost;
  }

  function cell(text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  function append(line) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-seq", String(line.seq));
    var when = document.createElement("td");
    var t = document.createElement("time");
    t.setAttribute("datetime", line.at);
    t.textContent = line.time;
    when.appendChild(t);
    tr.appendChild(when);
    tr.appendChild(cell(String(line.attempt), "num"));
    var level = cell("", "");
    var span = document.createElement("span");
    span.className = "level l-" + line.level;
    span.textContent = line.level;
    level.appendChild(span);
    tr.appendChild(level);
    tr.appendChild(cell(line.message, "message"));
    body.appendChild(tr);
  }

  function poll() {
    if (document.hidden) return later();
    fetch(url + "?after=" + encodeURIComponent(after), {
      credentials: "same-origin",
      headers: { "Accept": "application/json" }
    }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.json();
    }).then(function (d) {
      banner(false);
      if (d.lines.length) {
        var atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
        d.lines.forEach(append);
        if (table) table.hidden = false;
        if (empty) empty.hidden = true;
        if (atEnd) box.scrollTop = box.scrollHeight;
      }
      after = d.after;
      box.setAttribute("data-after", after);
      if (d.done) box.setAttribute("data-tail-done", "");
      else later();
    }).catch(function () {
      banner(true);
      later();
    });
  }

  function later() {
    window.setTimeout(poll, PERIOD);
  }

  later();
})();
