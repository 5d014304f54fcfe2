// Kairos dashboard keyboard shortcuts (a static file: the Content-Security-
// Policy allows no inline script). Everything here is an extra: without
// script the links and forms work the same, and no shortcut is announced.
//
//   /      focus the page's search field (else open Jobs with it focused)
//   g o    overview        g j  jobs        g e  executions
//   ?      show or hide the help (#shortcuts, a <dialog> in every page)
//
// Keys typed into a field, or with Ctrl, Alt or Meta held, are left alone.
(function () {
  "use strict";

  var GO = { o: "/ui/overview", j: "/ui/jobs", e: "/ui/executions" };
  var SEARCH = "input[type=search], [data-search]";
  var pendingG = 0;

  function typing(el) {
    if (!el || el === document.body) return false;
    if (el.isContentEditable) return true;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT";
  }

  function help() { return document.getElementById("shortcuts"); }

  function toggleHelp() {
    var d = help();
    if (!d || typeof d.showModal !== "function") return;
    if (d.open) d.close(); else d.showModal();
  }

  // A destination is offered only when the page's navigation links to it
  // (a role that has no such page gets no shortcut to it).
  function go(letter) {
    var path = GO[letter];
    if (!path) return false;
    var link = document.querySelector('header.top nav a[href="' + path + '"]');
    if (!link) return false;
    window.location.assign(path);
    return true;
  }

  function focusSearch() {
    var field = document.querySelector(SEARCH);
    if (field) {
      field.focus();
      if (field.select) field.select();
      return true;
    }
    if (!document.querySelector('header.top nav a[href="/ui/jobs"]')) return false;
    window.location.assign("/ui/jobs#search");
    return true;
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.defaultPrevented || evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var d = help();
    if (d && d.open) {
      // The dialog closes itself on Escape; "?" closes it too.
      if (evt.key === "?") { evt.preventDefault(); d.close(); }
      return;
    }
    if (typing(evt.target)) return;
    var now = Date.now();
    if (pendingG && now - pendingG < 1500) {
      pendingG = 0;
      if (go(evt.key)) evt.preventDefault();
      return;
    }
    pendingG = 0;
    if (evt.key === "g") { pendingG = now; return; }
    if (evt.key === "/") { if (focusSearch()) evt.preventDefault(); return; }
    if (evt.key === "?") { evt.preventDefault(); toggleHelp(); }
  });

  document.addEventListener("click", function (evt) {
    var t = evt.target;
    if (!t || !t.closest) return;
    if (t.closest("[data-shortcuts-open]")) { evt.preventDefault(); toggleHelp(); }
    if (t.closest("[data-shortcuts-close]")) { var d = help(); if (d && d.open) d.close(); }
  });

  function init() {
    if (help()) {
      document.querySelectorAll("[data-shortcuts-open]").forEach(function (b) { b.hidden = false; });
    }
    if (window.location.hash === "#search") {
      var field = document.querySelector(SEARCH);
      if (field) field.focus();
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
