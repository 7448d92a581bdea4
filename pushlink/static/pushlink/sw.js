/* hitl's service worker (served at /sw.js, scope /): shows an approval request pushed to this
   device with its actions, POSTs the pressed action's single-use token to /push/decide, opens the
   conversation on View or a tap, and shows the outcome in place of the request. */
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
  const actions = (data.actions || []).filter((a) => a.action !== "view" || max > 2).slice(0, max);
  return self.registration.showNotification(data.title || "hitl", {
    body: data.body || "",
    tag: data.tag || undefined,
    renotify: Boolean(data.tag),
    requireInteraction: data.type === "request",
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

async function decide(notification, decision, reason) {
  const data = notification.data || {};
  let answer;
  try {
    const response = await fetch("/push/decide", {
      method: "POST",
      credentials: "omit",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: data.tokens[decision], decision: decision, reason: reason || "" }),
    });
    answer = await response.json();
  } catch (error) {
    answer = { message: "Could not reach the site: open it to decide." };
  }
  return show({ type: "outcome", tag: notification.tag, title: answer.message || "Done.", body: "", url: data.url,
                approval_id: data.approval_id });
}

self.addEventListener("notificationclick", (event) => {
  const notification = event.notification;
  const data = notification.data || {};
  notification.close();
  if ((event.action === "approve" || event.action === "reject") && data.tokens && data.tokens[event.action]) {
    event.waitUntil(decide(notification, event.action, event.reply));
  } else {
    event.waitUntil(open(data.url || "/"));
  }
});
