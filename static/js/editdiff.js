// editdiff.js: the edit form's changes so far, drawn as a card draws a diff (partials/diff_rows.html,
// approvals.cards.diffs): rows of the old and new line numbers, − or +, and the text; removed lines
// before added ones; unchanged stretches as "⋯ N unchanged lines". A call that writes a file
// (data-file-argument) shows the lines of the file's text; any other, its arguments' JSON. The card's
// title follows the edit, asked of the server a moment after the typing stops. On submit, the
// server's diff and title are the ones that count.
(function () {
  "use strict";

  const CONTEXT = 3; // unchanged lines around a change of a file (approvals.cards.diffs.CONTEXT)
  const ARGUMENTS_CONTEXT = 1; // around a change of the arguments' JSON
  const TITLE_DELAY_MS = 250;
  // The lines compared by their longest common subsequence at most (an n·m table): the arguments
  // are whatever the model sent, and a list of thousands of items must not freeze the tab at each key.
  const MAX_COMPARED = 250000;
  const MAX_ROWS = 1000; // rows drawn at most (approvals.cards.diffs.MAX_ROWS)

  // Invisible and direction-changing characters as ⟨U+XXXX⟩, as core.visible.reveal shows them, and
  // a carriage return too, as a card's diff rows do (approval_tags._revealed).
  const HIDDEN = /[\p{Cf}\p{Cc}\p{Cs}\p{Zl}\p{Zp}\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u3164\uFE00-\uFE0F\uFFA0\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}]/gu;
  function reveal(text) {
    return text.replace(HIDDEN, (c) => (c === "\n" || c === "\t") ? c :
      "⟨U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "⟩");
  }

  // The arguments as the form holds them now, typed as the server will read them (approvals.forms).
  function edited(form, requested) {
    const values = Object.assign({}, requested);
    for (const input of form.querySelectorAll("[data-argument]")) {
      const name = input.dataset.argument;
      const widget = input.dataset.widget;
      if (widget === "checkbox") { values[name] = input.checked; continue; }
      const raw = input.value.replace(/\r\n/g, "\n");
      if (raw === "" && input.hasAttribute("data-optional")) { delete values[name]; continue; }
      if (widget === "number") values[name] = Number.isNaN(Number(raw)) ? raw : Number(raw);
      else if (widget === "json") { try { values[name] = JSON.parse(raw); } catch (error) { values[name] = raw; } }
      else values[name] = raw;
    }
    return values;
  }

  // Pretty JSON with its keys sorted, as the server shows an edit.
  function sorted(value) {
    if (Array.isArray(value)) return value.map(sorted);
    if (value && typeof value === "object") {
      const copy = {};
      for (const key of Object.keys(value).sort()) copy[key] = sorted(value[key]);
      return copy;
    }
    return value;
  }
  function pretty(value) {
    return JSON.stringify(sorted(value), null, 2) + "\n";
  }

  // A text's lines without their newlines: only "\n" ends a line, as in the file.
  function linesOf(text) {
    if (text === "") return [];
    const lines = text.split("\n");
    if (text.endsWith("\n")) lines.pop();
    return lines;
  }
  function lacksNewline(text) {
    return text !== "" && !text.endsWith("\n");
  }

  // [sign, line] pairs: " " unchanged, "-" removed, "+" added.
  function compare(before, after) {
    // The common head and tail as they are (an edit changes a few lines of many), the rest compared.
    let head = 0, tail = 0;
    while (head < before.length && head < after.length && before[head] === after[head]) head++;
    while (tail < before.length - head && tail < after.length - head &&
      before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail++;
    const same = (line) => [" ", line];
    return before.slice(0, head).map(same).concat(
      compared(before.slice(head, before.length - tail), after.slice(head, after.length - tail)),
      before.slice(before.length - tail).map(same));
  }
  function compared(before, after) {
    const n = before.length, m = after.length;
    if (n * m > MAX_COMPARED) { // too many changed lines to match up: all removed, then all added
      return before.map((line) => ["-", line]).concat(after.map((line) => ["+", line]));
    }
    const common = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        common[i][j] = before[i] === after[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
      }
    }
    const pairs = [];
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && before[i] === after[j]) { pairs.push([" ", before[i]]); i++; j++; }
      else if (i < n && (j === m || common[i + 1][j] >= common[i][j + 1])) { pairs.push(["-", before[i]]); i++; }
      else { pairs.push(["+", after[j]]); j++; }
    }
    return pairs;
  }

  // Each run of changed lines as its removed lines, then its added ones (approvals.cards.diffs.removed_first).
  function removedFirst(rows) {
    const ordered = [];
    let run = [];
    for (const row of rows.concat([{ kind: "end" }])) {
      if (row.kind === "del" || row.kind === "add") { run.push(row); continue; }
      ordered.push(...run.filter((r) => r.kind === "del"), ...run.filter((r) => r.kind === "add"));
      run = [];
      if (row.kind !== "end") ordered.push(row);
    }
    return ordered;
  }

  function gap(count) {
    return { kind: "gap", text: "⋯ " + count + " unchanged line" + (count === 1 ? "" : "s") };
  }

  // `before` against `after` line by line, as approvals.cards.diffs.text_rows draws them: every
  // changed line, the unchanged ones at most `context` lines from a change, the others as gaps (a
  // gap of one line is that line); lines compared without their newlines, a change of the final
  // newline said in words.
  function textRows(before, after, context) {
    const numbered = [];
    let old = 0, now = 0;
    for (const [sign, text] of compare(linesOf(before), linesOf(after))) {
      if (sign === " ") numbered.push({ kind: "same", text: text, old: ++old, new: ++now });
      else if (sign === "-") numbered.push({ kind: "del", text: text, old: ++old });
      else numbered.push({ kind: "add", text: text, new: ++now });
    }
    const oldLacks = lacksNewline(before), newLacks = lacksNewline(after);
    const note = oldLacks === newLacks ? null :
      { kind: "note", text: newLacks ? "Removes the newline at the end of the file." : "Adds a newline at the end of the file." };
    let changes = [];
    numbered.forEach((row, index) => { if (row.kind !== "same") changes.push(index); });
    if (!changes.length && note) changes = [numbered.length - 1];
    if (!changes.length) return [];
    const near = new Array(numbered.length).fill(false);
    for (const change of changes) {
      for (let k = Math.max(0, change - context); k <= Math.min(numbered.length - 1, change + context); k++) near[k] = true;
    }
    const rows = [];
    let hidden = [];
    numbered.concat([null]).forEach(function (row, index) {
      if (row && !near[index]) { hidden.push(row); return; }
      if (hidden.length === 1) rows.push(hidden[0]);
      else if (hidden.length) rows.push(gap(hidden.length));
      hidden = [];
      if (row) rows.push(row);
    });
    return capped(removedFirst(rows)).concat(note ? [note] : []);
  }
  function capped(rows) {
    if (rows.length <= MAX_ROWS) return rows;
    return rows.slice(0, MAX_ROWS).concat([{ kind: "note", text: "… " + (rows.length - MAX_ROWS) + " more rows, not shown here: the arguments hold the whole text." }]);
  }

  // Arguments against arguments as their JSON's lines, unnumbered: they are no file's lines.
  function argumentRows(before, after) {
    return textRows(pretty(before), pretty(after), ARGUMENTS_CONTEXT).map((row) => ({ kind: row.kind, text: row.text }));
  }

  // The edit as approvals.cards.diffs.edit_rows draws it: for a call that writes a file, its other
  // arguments' JSON lines that changed, then the lines of the file's text that changed; else the JSON.
  function editRows(requested, values, name) {
    if (!name || typeof requested[name] !== "string" || typeof values[name] !== "string") return argumentRows(requested, values);
    const rest = function (args) { const copy = Object.assign({}, args); delete copy[name]; return copy; };
    const shown = pretty(rest(requested)) === pretty(rest(values)) ? [] : argumentRows(rest(requested), rest(values));
    const changed = textRows(requested[name], values[name], CONTEXT);
    return shown.concat(shown.length && changed.length ? [{ kind: "file", text: name }] : [], changed);
  }

  function element(tag, className, text) {
    const made = document.createElement(tag);
    if (className) made.className = className;
    if (text !== undefined) made.textContent = text;
    return made;
  }

  // The rows as partials/diff_rows.html draws them; all text as text, never markup.
  function draw(target, rows) {
    target.replaceChildren();
    if (!rows.length) { target.append(element("span", "meta", "No change yet.")); return; }
    const table = element("table", "diff-rows");
    const head = element("thead", "visually-hidden");
    const heading = element("tr");
    for (const name of ["Line before", "Line after", "Change", "Text"]) {
      const cell = element("th", "", name);
      cell.scope = "col";
      heading.append(cell);
    }
    head.append(heading);
    const body = element("tbody");
    for (const row of rows) {
      const line = element("tr", "diff-" + row.kind);
      if (row.kind === "same" || row.kind === "del" || row.kind === "add") {
        const sign = element("td", "diff-sign");
        const shown = element("span", "", row.kind === "del" ? "−" : row.kind === "add" ? "+" : "");
        shown.setAttribute("aria-hidden", "true");
        sign.append(shown);
        if (row.kind !== "same") sign.append(element("span", "visually-hidden", row.kind === "del" ? "removed" : "added"));
        line.append(element("td", "diff-ln", row.old ? String(row.old) : ""), element("td", "diff-ln", row.new ? String(row.new) : ""),
          sign, element("td", "diff-code", reveal(row.text)));
      } else {
        const cell = element("td", "", reveal(row.text));
        cell.colSpan = 4;
        line.append(cell);
      }
      body.append(line);
    }
    table.append(head, body);
    const scroll = element("div", "diff-scroll");
    scroll.append(table);
    target.append(scroll);
  }

  function showDiff(form) {
    const target = document.getElementById(form.dataset.liveDiff);
    if (!target || !form.dataset.requested) return;
    const requested = JSON.parse(form.dataset.requested);
    draw(target, editRows(requested, edited(form, requested), form.dataset.fileArgument || ""));
  }

  // The card's title (a chat card's, or an inbox row's) as the edited arguments would make it: asked
  // of the server (approvals.views.edit_title_view), so it is the server's own rule; the last answer
  // asked for wins. The title the card had comes back if the form goes without a submit (Cancel).
  const waiting = new WeakMap();
  const asked = new WeakMap();
  function titleOf(form) {
    const card = form.closest(".tool-card");
    return document.getElementById("row-title-" + form.dataset.approval) || (card && card.querySelector(".card-title"));
  }
  function askTitle(form) {
    clearTimeout(waiting.get(form));
    waiting.set(form, setTimeout(function () {
      if (!form.isConnected || !form.dataset.titleUrl) return;
      const number = (asked.get(form) || 0) + 1;
      asked.set(form, number);
      fetch(form.dataset.titleUrl, { method: "POST", body: new FormData(form), credentials: "same-origin" })
        .then((response) => (response.ok ? response.json() : null))
        .then(function (answer) {
          const title = titleOf(form);
          if (!answer || typeof answer.title !== "string" || !form.isConnected || asked.get(form) !== number || !title) return;
          if (!title.hasAttribute("data-shown-title")) title.dataset.shownTitle = title.textContent;
          title.dataset.titleOf = form.dataset.approval;
          title.textContent = answer.title;
        })
        .catch(function () {}); // offline: the title stays as it was
    }, TITLE_DELAY_MS));
  }
  function settleTitles() {
    for (const title of document.querySelectorAll("[data-shown-title]")) {
      if (document.querySelector('form[data-live-diff][data-approval="' + title.dataset.titleOf + '"]')) continue;
      if (title.dataset.titleKept !== "true") title.textContent = title.dataset.shownTitle;
      delete title.dataset.shownTitle;
      delete title.dataset.titleOf;
      delete title.dataset.titleKept;
    }
  }

  function changed(event) {
    const form = event.target.closest && event.target.closest("form[data-live-diff]");
    if (!form) return;
    showDiff(form);
    askTitle(form);
  }
  document.addEventListener("input", changed);
  document.addEventListener("change", changed);
  // A submit the server took keeps the edited title until the pushed card brings the stored one.
  document.addEventListener("htmx:beforeSwap", function (event) {
    const config = event.detail.requestConfig;
    const form = config && config.elt;
    if (!form || !form.matches || !form.matches("form[data-live-diff]") || event.detail.xhr.status !== 200) return;
    const title = titleOf(form);
    if (title && title.hasAttribute("data-shown-title")) title.dataset.titleKept = "true";
  });
  function settle() {
    settleTitles();
    for (const form of document.querySelectorAll("form[data-live-diff]")) showDiff(form);
  }
  document.addEventListener("htmx:afterSettle", settle);
  document.addEventListener("DOMContentLoaded", settle);
})();
