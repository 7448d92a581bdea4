// stepup.js: the browser's half of the passkey ceremonies (navigator.credentials.create/get). Adding
// a passkey on the profile page, and approving a call that needs step-up on its card: the server
// issues the challenge (bound to the approval and the version shown), verifies the answer and decides.
(function () {
  "use strict";

  function toBytes(base64url) {
    const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(base64 + "===".slice((base64.length + 3) % 4));
    return Uint8Array.from(binary, function (c) { return c.charCodeAt(0); });
  }
  function toBase64url(buffer) {
    let binary = "";
    new Uint8Array(buffer).forEach(function (byte) { binary += String.fromCharCode(byte); });
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }
  // Every answer is JSON: {"detail": ...} when refused.
  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRFToken": csrfToken()},
      body: JSON.stringify(body),
    });
    let data = {};
    try { data = await response.json(); } catch (error) { data = {}; }
    if (!response.ok) throw new Error(data.detail || "Refused (" + response.status + ").");
    return data;
  }

  function credentialJSON(credential) {
    const response = credential.response, json = {
      id: credential.id, rawId: toBase64url(credential.rawId), type: credential.type,
      clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {},
      response: {clientDataJSON: toBase64url(response.clientDataJSON)},
    };
    if (response.attestationObject) {
      json.response.attestationObject = toBase64url(response.attestationObject);
      if (response.getTransports) json.response.transports = response.getTransports();
    } else {
      json.response.authenticatorData = toBase64url(response.authenticatorData);
      json.response.signature = toBase64url(response.signature);
      if (response.userHandle) json.response.userHandle = toBase64url(response.userHandle);
    }
    if (credential.authenticatorAttachment) json.authenticatorAttachment = credential.authenticatorAttachment;
    return json;
  }

  function creationOptions(options) {
    options.challenge = toBytes(options.challenge);
    options.user.id = toBytes(options.user.id);
    (options.excludeCredentials || []).forEach(function (c) { c.id = toBytes(c.id); });
    return options;
  }
  function requestOptions(options) {
    options.challenge = toBytes(options.challenge);
    (options.allowCredentials || []).forEach(function (c) { c.id = toBytes(c.id); });
    return options;
  }

  function unsupported() {
    return !window.PublicKeyCredential || !navigator.credentials;
  }

  // WebAuthn refuses an IP address as a passkey's site ("This is an invalid domain"). The profile
  // page says so from the server (stepup.hosts); a card may come by the socket, rendered without the
  // request, so its note and its Approve say it here: the same rule, the same page at localhost.
  function ipHost() {
    const host = window.location.hostname;
    return host.charAt(0) === "[" || /^\d+\.\d+\.\d+\.\d+$/.test(host);
  }
  function atLocalhost() {
    const host = window.location.hostname;
    if (host !== "[::1]" && !/^127\./.test(host)) return "";
    const here = window.location;
    return here.protocol + "//localhost" + (here.port ? ":" + here.port : "") + here.pathname + here.search + here.hash;
  }
  function needsAName(element, sentence) {
    const url = atLocalhost();
    element.textContent = "Passkeys need a name, not an IP address: browsers refuse " + window.location.hostname +
      " as a passkey's site. " + (url ? "Open this page at " : "Open this site at a name that reaches this server instead.");
    if (url) {
      const link = document.createElement("a");
      link.href = url;
      link.textContent = new URL(url).origin;  // the page's own path would not fit a phone's card
      element.append(link, " " + sentence);
    }
  }
  function markNotes(root) {
    if (!ipHost() || !root.querySelectorAll) return;
    root.querySelectorAll(".step-up-note:not(.needs-a-name)").forEach(function (note) {
      note.classList.add("needs-a-name");
      const url = atLocalhost();
      note.title = "Passkeys need a name, not an IP address: browsers refuse " + window.location.hostname + " as a passkey's site.";
      // Its own line, no wider than "with your passkey": a phone's card has no room to spare.
      note.textContent = "with your passkey ";
      note.append(document.createElement("br"));
      if (!url) return note.append("not at an IP address");
      const link = document.createElement("a");
      link.href = url;
      link.textContent = "only at localhost";
      note.append(link);
    });
  }
  document.addEventListener("htmx:load", function (event) { markNotes(event.detail.elt); });
  document.addEventListener("DOMContentLoaded", function () { markNotes(document); });

  // The profile page: name it, type the password, let the authenticator make the key.
  async function addPasskey(form) {
    const status = form.querySelector(".passkey-status");
    const say = function (text, registered) {
      status.textContent = text;
      status.classList.toggle("registered", Boolean(registered));
    };
    if (unsupported()) return say("This browser has no passkeys.");
    if (ipHost()) return needsAName(status, "instead.");
    try {
      say("Follow your browser's prompt…");
      const options = await post(form.dataset.passkeyOptions, {password: form.elements.password.value});
      const credential = await navigator.credentials.create({publicKey: creationOptions(options)});
      const added = await post(form.dataset.passkeyRegister, {name: form.elements.name.value, credential: credentialJSON(credential)});
      showAdded(form, added);
      form.reset();
      say("Passkey \u201c" + added.name + "\u201d registered. Approvals that need a passkey will ask for it.", true);
    } catch (error) {
      say(error.name === "NotAllowedError" ? "Cancelled, or the passkey refused." : error.message);
    }
  }

  // The new passkey in the section's list, as the server renders its row: no reload, so that the
  // confirmation stays on the page.
  function showAdded(form, added) {
    const section = form.closest(".profile-section") || document;
    const list = section.querySelector("ul.passkeys");
    if (!list || !added.row) return;
    const row = document.createElement("template");
    row.innerHTML = added.row.trim();
    list.appendChild(row.content);
    list.hidden = false;
    const none = section.querySelector(".passkeys-none");
    if (none) none.remove();
  }

  // A card's Approve on a call that needs step-up: challenge, passkey, approve; the card then
  // reloads its controls (the push brings the same to every other tab).
  async function approveWithPasskey(form, marker) {
    const card = form.closest(".approval") || form;
    const field = function (name) {
      const input = document.querySelector('[name="' + name + '"][form="' + form.id + '"]');
      return input ? input.value : "";
    };
    const status = statusOf(card);
    const buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    try {
      if (unsupported()) throw new Error("This browser has no passkeys: approve on one that has.");
      if (ipHost()) {
        needsAName(status, "to approve with your passkey.");
        return buttons.forEach(function (b) { b.disabled = false; });
      }
      const shownHash = form.elements.shown_hash ? form.elements.shown_hash.value : "";
      const asked = await post(marker.dataset.stepUpOptions, {shown_hash: shownHash, confirmation: field("confirmation")});
      if (!asked.step_up) {
        marker.remove();  // no longer needed (the agent's setting changed): the ordinary approval
        return form.requestSubmit();
      }
      status.textContent = "Confirm with your passkey…";
      const credential = await navigator.credentials.get({publicKey: requestOptions(asked.options)});
      await post(marker.dataset.stepUpApprove, {
        credential: credentialJSON(credential),
        confirmation: field("confirmation"), comment: field("comment"),
      });
      status.textContent = "Approved with your passkey.";
      if (window.htmx) window.htmx.ajax("GET", marker.dataset.stepUpControls, {target: "#" + card.id, swap: "outerHTML"});
    } catch (error) {
      status.textContent = error.name === "NotAllowedError" ? "Cancelled, or the passkey refused: not approved." : error.message;
      buttons.forEach(function (b) { b.disabled = false; });
    }
  }
  function statusOf(card) {
    let status = card.querySelector(".step-up-status");
    if (!status) {
      status = document.createElement("p");
      status.className = "step-up-status error";
      status.setAttribute("role", "alert");
      card.appendChild(status);
    }
    return status;
  }

  // Capture phase: runs before htmx's own submit handler on the form, which it stops.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.matches && form.matches("form.passkey-add")) {
      event.preventDefault();
      return addPasskey(form);
    }
    const marker = form.querySelector && form.querySelector("[data-step-up-options]");
    if (!marker) return;
    const submitter = event.submitter;
    if (submitter && submitter.name === "decision" && submitter.value !== "approve") return;
    event.preventDefault();
    event.stopImmediatePropagation();
    approveWithPasskey(form, marker);
  }, true);
})();
