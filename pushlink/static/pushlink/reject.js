/* The reject form a notification's Reject opens: its token arrives in the #fragment (never sent to
   the server in a URL, so never logged), moves into the form, and the call it names is said in
   words before anyone rejects it. */
"use strict";

(function () {
  const form = document.querySelector("[data-push-reject-form]");
  if (!form) return;
  const token = decodeURIComponent(location.hash.replace(/^#/, ""));
  history.replaceState(null, "", location.pathname);  // the token leaves the address bar and history
  const field = (name) => document.querySelector(`[data-push-reject-${name}]`);
  const fail = (message) => {
    field("loading").hidden = true;
    field("error").textContent = message;
    field("error").hidden = false;
    form.hidden = true;
  };
  if (!token) return fail("This reject form has no notification to reject: open the site.");
  field("token").value = token;
  fetch(form.getAttribute("action") + "call", {
    method: "POST", credentials: "omit", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token: token }),
  })
    .then((response) => response.json())
    .then((call) => {
      if (call.url) field("site").href = call.url;
      if (call.state !== "form") return fail(call.message || "This reject form is not valid: open the site.");
      field("loading").hidden = true;
      field("sentence").textContent = call.sentence;
      field("asked-by").textContent = call.asked_by;
      field("risk").textContent = call.risk;
      field("sentence").parentElement.hidden = false;
      field("asked-by").parentElement.hidden = false;
      document.getElementById("reason").focus();
    })
    .catch(() => fail("Could not reach the site: try again."));
})();
