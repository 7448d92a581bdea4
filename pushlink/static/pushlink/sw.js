/* hitl's service worker (served at /sw.js, scope /): shows an approval request pushed to this
   device with its actions; Approve POSTs its single-use token to /push/decide, Reject opens the
   reject form on the site (browsers' notifications have no inline reply: the form asks why),
   a warning's Extend POSTs its token to /push/extend; "Approve on the site", View or a tap open
   the conversation. The outcome is shown in place of the request. */
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

function readPush(event) {
  try {
    return event.data ? event.data.json() : {};
  } catch (error) {
    return {};
  }
}

function show(data) {
  const max = (self.Notification && Notification.maxActions) || 2;
  // View gives way to the other actions when the platform shows fewer (Chromium: 2): a tap opens it too.
  const all = data.actions || [];
  const actions = [...all.filter((a) => a.action !== "view"), ...all.filter((a) => a.action === "view")].slice(0, max);
  return self.registration.showNotification(data.title || "hitl", {
    body: data.body || "",
    tag: data.tag || undefined,
    renotify: Boolean(data.tag),
    requireInteraction: data.type === "request" || data.type === "warning",
    actions: actions.map((a) => ({ action: a.action, title: a.title })),
    data: { url: data.url || "/", tokens: data.tokens || {}, approval_id: data.approval_id },
  });
}

self.addEventListener("push", (event) => event.waitUntil(show(readPush(event))));

async function open(url) {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const here = windows.find((client) => client.url === url);
  if (here) return here.focus();
  return self.clients.openWindow(url);
}

async function post(notification, path, body) {
  const data = notification.data || {};
  let answer;
  try {
    const response = await fetch(path, {
      method: "POST",
      credentials: "omit",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    answer = await response.json();
  } catch (error) {
    answer = { message: "Could not reach the site: open it to decide." };
  }
  return show({ type: "outcome", tag: notification.tag, title: answer.message || "Done.", body: "", url: data.url,
                approval_id: data.approval_id });
}

async function openForm(url) {
  // A new window for the reject form; where the browser refuses one (it no longer counts the click
  // as the person's), an open tab of the site shows the form instead.
  try {
    return await self.clients.openWindow(url);
  } catch (error) {
    const windows = await self.clients.matchAll({ type: "window" });
    if (!windows.length) throw error;
    return windows[0].navigate(url);
  }
}

self.addEventListener("notificationclick", (event) => {
  const notification = event.notification;
  const data = notification.data || {};
  const tokens = data.tokens || {};
  notification.close();
  if (event.action === "approve" && tokens.approve) {
    event.waitUntil(post(notification, "/push/decide", { token: tokens.approve, decision: "approve" }));
  } else if (event.action === "reject" && tokens.reject) {
    // The token rides in the #fragment: no request line, log or trace holds it.
    event.waitUntil(openForm("/push/reject/#" + encodeURIComponent(tokens.reject)));
  } else if (event.action === "extend" && tokens.extend) {
    event.waitUntil(post(notification, "/push/extend", { token: tokens.extend }));
  } else {
    event.waitUntil(open(data.url || "/"));
  }
});
