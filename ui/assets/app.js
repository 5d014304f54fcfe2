// Kairos dashboard behaviour, on top of htmx (no inline script anywhere:
// the Content-Security-Policy allows scripts from /ui/assets only).
//
// - Live regions ([data-live]) poll every 2 s through htmx; a poll is skipped
//   while the tab is hidden and one runs at once when it shows again.
// - A banner says when a poll could not reach the server, and goes away at
//   the next poll that does.
// - Small form helpers: "tick all" for bulk actions, JSON checking of
//   params, showing only the schedule fields of the chosen kind.
(function () {
  "use strict";

  function banner(lost) {
    var b = document.getElementById("live-lost");
    if (b) b.hidden = !lost;
  }

  function isLive(evt) {
    var elt = evt.detail && evt.detail.elt;
    return elt && elt.hasAttribute && elt.hasAttribute("data-live");
  }

  document.addEventListener("htmx:beforeRequest", function (evt) {
    if (isLive(evt) && document.hidden) evt.preventDefault();
  });
  document.addEventListener("htmx:sendError", function (evt) {
    if (isLive(evt)) banner(true);
  });
  document.addEventListener("htmx:timeout", function (evt) {
    if (isLive(evt)) banner(true);
  });
  document.addEventListener("htmx:responseError", function (evt) {
    if (isLive(evt)) banner(true);
  });
  document.addEventListener("htmx:afterRequest", function (evt) {
    if (isLive(evt) && evt.detail.successful) banner(false);
  });
  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) return;
    document.querySelectorAll("[data-live]").forEach(function (el) {
      window.htmx.trigger(el, "kairos:refresh");
    });
  });

  // Bulk actions: the header checkbox ticks the rows on this page only.
  document.addEventListener("change", function (evt) {
    var t = evt.target;
    if (t.matches && t.matches("[data-select-all]")) {
      var name = t.getAttribute("data-select-all");
      var form = t.closest("form");
      if (!form) return;
      form.querySelectorAll('input[type=checkbox][name="' + name + '"]').forEach(function (c) {
        c.checked = t.checked;
      });
    }
  });

  // Params: say at once when the text is not JSON (the server checks too).
  document.addEventListener("input", function (evt) {
    var t = evt.target;
    if (!t.matches || !t.matches("textarea[data-json]")) return;
    var out = document.getElementById(t.id + "-error");
    var msg = "";
    if (t.value.trim() !== "") {
      try { JSON.parse(t.value); } catch (e) { msg = "params is not valid JSON: " + e.message; }
    }
    if (msg) t.setAttribute("aria-invalid", "true"); else t.removeAttribute("aria-invalid");
    if (out) out.textContent = msg;
  });

  // The new-job form shows the fields of the chosen schedule kind.
  var KIND_FIELDS = {
    now: ["timezone"],
    at: ["triggerAt", "timezone"],
    cron: ["cronExpr", "timezone", "startAt", "endAt", "misfirePolicy", "overlapPolicy"],
    every: ["everyMs", "timezone", "startAt", "endAt", "misfirePolicy", "overlapPolicy"],
    delay: ["delayMs", "timezone", "startAt", "endAt", "misfirePolicy", "overlapPolicy"]
  };
  function showKind(form) {
    var checked = form.querySelector("input[name=kind]:checked");
    if (!checked) return;
    var show = KIND_FIELDS[checked.value] || [];
    form.querySelectorAll(".kind-fields .field").forEach(function (f) {
      var input = f.querySelector("input, select");
      f.hidden = !!input && show.indexOf(input.name) < 0;
    });
  }
  document.addEventListener("change", function (evt) {
    var t = evt.target;
    if (t.name === "kind" && t.form) showKind(t.form);
  });

  function init() {
    document.querySelectorAll("form.job-form").forEach(showKind);
    document.querySelectorAll("[data-select-on-focus]").forEach(function (el) {
      el.addEventListener("focus", function () { el.select(); });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
