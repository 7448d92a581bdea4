// cardkeys.js: a chat card decided by one key, never blind. With the card focused (it, a control in
// it, or nothing at all: then the newest pending card), 1 approves, 2 approves and allows alike calls
// in this conversation, 3 opens the reason to reject (Enter sends), e edits. Nothing approves, by key
// or by click, until the whole preview has been on screen: scrolled into view (its top and its bottom,
// and a long preview's box to its end); the first press brings it there and says so.
// A new pending card takes the focus when nothing else holds it (or the composer is empty), so the
// keys reach it at once. The server checks every decision again; this only keeps eyes on the preview.
(function () {
  "use strict";

  // Enter sends a reason (to reject, or an instruction instead); Shift+Enter makes a new line.
  document.addEventListener("keydown", function (event) {
    const box = event.target.closest && event.target.closest("textarea[data-enter-sends]");
    if (box && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      box.form.requestSubmit();
    }
  });

  const chat = document.querySelector(".chat");
  if (!chat) return;
  const PENDING = ".tool-card:has(> .approval-pending)";
  const seen = new WeakMap(); // preview figure -> what of it has been on screen
  const EDGE = 4; // px

  function looked(figure) {
    const state = seen.get(figure) || { top: false, bottom: false, end: false };
    const rect = figure.getBoundingClientRect();
    if (rect.width || rect.height) {
      const height = window.innerHeight || document.documentElement.clientHeight;
      // Within a few pixels: scrolled into view, an edge may sit a fraction of a pixel past it.
      if (rect.top >= -EDGE && rect.top < height) state.top = true;
      if (rect.bottom > 0 && rect.bottom <= height + EDGE) state.bottom = true;
      const pre = figure.querySelector("pre");
      if (!pre || pre.scrollHeight <= pre.clientHeight + 2 || pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 2) {
        if (state.top || state.bottom) state.end = true;
      }
    }
    seen.set(figure, state);
    return state;
  }
  const whole = (state) => state.top && state.bottom && state.end;
  const previewOf = (card) => card.querySelector(":scope > .approval-pending .preview");

  function previewRead(card) {
    const figure = previewOf(card);
    return !figure || whole(looked(figure));
  }

  let looking = false;
  function lookAll() {
    if (looking) return;
    looking = true;
    requestAnimationFrame(function () {
      looking = false;
      for (const card of chat.querySelectorAll(PENDING)) {
        const figure = previewOf(card);
        if (figure) looked(figure);
      }
    });
  }
  document.addEventListener("scroll", lookAll, { capture: true, passive: true });
  window.addEventListener("resize", lookAll, { passive: true });

  function say(card, text) {
    const note = card.querySelector(":scope > .approval-pending .key-note");
    if (note) note.textContent = text;
  }

  // Bring the preview on screen instead of approving; the next press approves once it was all seen.
  function showPreview(card, key) {
    const figure = previewOf(card);
    const state = looked(figure);
    figure.scrollIntoView({ block: state.top ? "end" : "start" });
    const pre = figure.querySelector("pre");
    const now = looked(figure);
    if (whole(now)) {
      say(card, "The preview is on screen: read it, then " + (key ? "press " + key : "approve") + " again.");
    } else if (pre && !now.end) {
      say(card, "Scroll the preview to its end before approving.");
    } else {
      say(card, "Scroll through the whole preview before approving.");
    }
  }

  // A click on Approve or "Always here" waits for the preview too (keys click the same buttons).
  chat.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("button[value=approve]");
    const card = button && button.closest(PENDING);
    if (!card || previewRead(card)) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    showPreview(card, button.dataset.key || "");
  }, true);

  const typing = (element) =>
    element && (element.isContentEditable || element.tagName === "TEXTAREA" || element.tagName === "SELECT" ||
      (element.tagName === "INPUT" && !["checkbox", "radio", "button", "submit", "reset"].includes(element.type)));
  const newest = () => { const all = chat.querySelectorAll(PENDING); return all[all.length - 1] || null; };

  function cardFor(target) {
    if (!target || target === document.body || target === document.documentElement) return newest();
    return target.closest ? target.closest(PENDING) : null;
  }

  function press(card, key) {
    const controls = card.querySelector(":scope > .approval-pending");
    if (key === "1" || key === "2") {
      const button = key === "1"
        ? controls.querySelector("form[id^='approve-'] button[value=approve]")
        : controls.querySelector(".always-form button[value=approve]");
      if (!button) {
        say(card, key === "1" ? "You may not approve this call here." : "No rule may approve this call: decide it with 1 or 3.");
        return;
      }
      if (button.disabled) {
        const confirmation = controls.querySelector("input[name=confirmation]");
        if (confirmation) { confirmation.focus(); say(card, "Type the confirmation, then press Enter."); }
        return;
      }
      button.click();
      return;
    }
    const target = controls.querySelector('[data-key="' + key + '"]');
    if (target && target.hasAttribute("hx-get")) {
      // As htmx would on a click, even before it has processed a card just swapped in.
      htmx.ajax("GET", target.getAttribute("hx-get"), { source: target, target: target.getAttribute("hx-target"), swap: target.getAttribute("hx-swap") });
    } else if (target) {
      target.click();
    }
  }

  document.addEventListener("keydown", function (event) {
    // A held key repeats: a held 1 would approve the next card that takes the focus, unread.
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing || event.repeat) return;
    if (!["1", "2", "3", "e"].includes(event.key) || typing(event.target)) return;
    const card = cardFor(event.target);
    if (!card) return;
    event.preventDefault();
    press(card, event.key);
  });

  // A card that arrives waiting takes the focus when nothing else holds it, or the composer is empty;
  // once per card, so a later push never pulls the focus away from where the person put it.
  const offered = new Set();
  function focusNewest() {
    lookAll();
    const card = newest();
    if (!card || offered.has(card.id)) return;
    offered.add(card.id);
    const active = document.activeElement;
    const free = !active || active === document.body || !document.contains(active) ||
      (active.id === "message-box" && !active.value.trim());
    if (free && !card.contains(active)) card.focus({ preventScroll: true });
  }
  document.addEventListener("htmx:afterSettle", focusNewest);
  document.addEventListener("htmx:oobAfterSwap", focusNewest);
  document.addEventListener("DOMContentLoaded", focusNewest);
})();
