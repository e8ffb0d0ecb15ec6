// The board's few interactions: the writing automation checkbox and the mark_done/cancel buttons.
// Both call the JSON API with the browser's own (same-origin) credentials; a viewer's page has neither.
"use strict";

function announce(text) {
  const region = document.getElementById("announcer");
  if (region) region.textContent = text;
}

async function problemText(response) {
  try {
    const body = await response.json();
    return body.detail || body.title || response.statusText;
  } catch (e) {
    return response.statusText;
  }
}

async function refreshNeedsYou() {
  const current = document.getElementById("needs-you");
  if (!current) return;
  const response = await fetch(current.dataset.fragment, { credentials: "same-origin", cache: "no-store" });
  if (!response.ok) throw new Error(await problemText(response));
  const holder = document.createElement("div");
  holder.innerHTML = await response.text();
  const fresh = holder.querySelector("#needs-you");
  if (fresh) current.replaceWith(fresh);
}

async function toggleAutomation(event) {
  const box = event.target;
  const wanted = box.checked;
  const state = document.getElementById("writing-automation-state");
  box.disabled = true;
  try {
    const response = await fetch(box.dataset.endpoint, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ enabled: wanted }),
    });
    if (!response.ok) throw new Error(await problemText(response));
    const body = await response.json();
    box.checked = body.enabled;
    if (state) state.textContent = body.enabled ? "on" : "off";
    const by = document.getElementById("writing-automation-by");
    if (by && body.updated_by) by.textContent = "turned " + (body.enabled ? "on" : "off") + " by " + body.updated_by + " just now";
    await refreshNeedsYou();
    announce("Writing automation is " + (body.enabled ? "on" : "off") + ".");
  } catch (error) {
    box.checked = !wanted;
    announce("Could not change writing automation: " + error.message);
    window.alert("Could not change writing automation: " + error.message);
  } finally {
    box.disabled = false;
  }
}

async function ticketAction(event) {
  const button = event.target.closest("button.act");
  if (!button) return;
  const { key, action } = button.dataset;
  const verb = action === "mark_done" ? "Mark " + key + " done" : "Cancel " + key;
  if (!window.confirm(verb + "? This cannot be undone.")) return;
  button.disabled = true;
  try {
    const response = await fetch("/api/v1/tickets/" + encodeURIComponent(key) + "/" + action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    if (!response.ok) throw new Error(await problemText(response));
    announce(verb + ": done.");
    window.location.reload();
  } catch (error) {
    button.disabled = false;
    window.alert(verb + " failed: " + error.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("writing-automation");
  if (box) box.addEventListener("change", toggleAutomation);
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest("button.act")) ticketAction(event);
  });
});
