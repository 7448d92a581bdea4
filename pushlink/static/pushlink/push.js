/* The profile page's "Turn on notifications on this device": registers /sw.js, asks for permission,
   subscribes with the site's VAPID key and stores the subscription (POST /push/subscriptions). */
"use strict";
(function () {
  const section = document.getElementById("push-optin");
  if (!section) return;
  const button = section.querySelector("[data-push-subscribe]");
  const status = section.querySelector("[data-push-status]");
  const say = (text) => { status.textContent = text; };

  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
    button.disabled = true;
    say("This browser cannot show notifications from a site (on an iPhone, add the site to the home screen first).");
    return;
  }

  function applicationServerKey(base64url) {
    const base64 = (base64url + "=".repeat((4 - (base64url.length % 4)) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  }

  async function turnOn() {
    const registration = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
    await navigator.serviceWorker.ready;
    const permission = await Notification.requestPermission();
    if (permission !== "granted") {
      throw new Error("Notifications are blocked for this site: allow them in the browser's settings, then try again.");
    }
    const subscription = await registration.pushManager.subscribe({
      userVisibleOnly: true,
      applicationServerKey: applicationServerKey(section.dataset.vapidKey),
    });
    const response = await fetch(section.dataset.subscribeUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": section.querySelector("[name=csrfmiddlewaretoken]").value },
      body: JSON.stringify(subscription.toJSON()),
    });
    if (!response.ok) {
      let detail = "The site refused this device.";
      try { detail = (await response.json()).detail || detail; } catch (error) { /* not JSON */ }
      throw new Error(detail);
    }
  }

  button.addEventListener("click", async () => {
    button.disabled = true;
    say("Turning notifications on…");
    try {
      await turnOn();
      say("Notifications are on for this device.");
      window.location.reload();
    } catch (error) {
      say(error.message || String(error));
      button.disabled = false;
    }
  });
})();
