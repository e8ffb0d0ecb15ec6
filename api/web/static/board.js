// The board's script: every action form goes to the JSON API with the browser's own (same-origin) credentials,
// and the page keeps itself current by asking for itself again with its ETag (a 304 costs nothing).
// No framework, no build step: the server renders the HTML, this only sends forms and merges fresh pages in (with
// idiomorph, the one library it loads).
"use strict";

const POLL_MS = 2000;

function announce(text) {
  const region = document.getElementById("announcer");
  if (region) region.textContent = text;
}

// ---------------------------------------------------------------------------------------------------------
// Actions: a <form class="api"> names its endpoint (data-endpoint, `{field}` filled from the form), its method
// (data-method, POST by default), an optional confirmation (data-confirm, on the form or the chosen <option>),
// what to say when it worked (data-done), where to go then (data-go-to), and data-base: a resource to read first,
// so a PUT changes only the fields this form has (the wallet's lock keeps the budget someone else just set). A
// field with data-type="json" sends the JSON document it holds. The automation checkbox sends
// itself the same way (`send`).

// Controls a person has changed and not yet sent: the live refresh leaves them as they are.
const edited = new Set();

// Where a refusal of `control` (a form, or the automation checkbox) is said.
function problemElement(control) {
  return (control.dataset.problem && document.getElementById(control.dataset.problem)) || control.querySelector(".problem");
}

function showProblem(control, text) {
  const holder = problemElement(control);
  if (holder) {
    holder.textContent = text;
    holder.hidden = !text;
  }
}

// Clear every refusal the script has shown: the next action that works leaves none of them standing.
function clearProblems() {
  for (const holder of document.querySelectorAll(".problem")) {
    if (!holder.hidden || holder.textContent) {
      holder.textContent = "";
      holder.hidden = true;
    }
  }
}

// "2 minutes ago", measured against the service's own clock (the answer's Date), not this machine's.
function agoFrom(isoText, response) {
  const then = Date.parse(isoText || "");
  if (Number.isNaN(then)) return "";
  const served = Date.parse((response && response.headers.get("Date")) || "");
  const seconds = Math.max(0, ((Number.isNaN(served) ? Date.now() : served) - then) / 1000);
  if (seconds < 60) return "just now";
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return minutes === 1 ? "a minute ago" : minutes + " minutes ago";
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return hours === 1 ? "an hour ago" : hours + " hours ago";
  return "on " + isoText.slice(0, 10);
}

// A 412: someone changed the thing since this page showed it. Say who did what, and when.
function describeStale(body, response) {
  const what = (body && body.last_change) || "It was changed by someone else";
  const when = body && body.changed_at ? " " + agoFrom(body.changed_at, response) : "";
  return what + when + ". Nothing was changed; the page shows it as it is now.";
}

// Where a form's refusal goes once the page shows the change: beside the control, or, when the control went with
// its old place (a card that moved column), beside the same ticket's controls in its new place.
function staleHolder(form, key) {
  if (form.isConnected) {
    const actions = form.closest(".actions");
    const beside = actions && actions.querySelector(":scope > .problem");
    return beside || problemElement(form);
  }
  return (key && document.querySelector('.actions[data-key="' + CSS.escape(key) + '"] > .problem')) || null;
}

function describeProblem(body, response) {
  let text = (body && (body.detail || body.title)) || response.statusText || "HTTP " + response.status;
  const errors = body && Array.isArray(body.errors) ? body.errors : [];
  if (errors.length) text += " — " + errors.map((e) => (e.path ? e.path + ": " : "") + e.message).join("; ");
  return text;
}

function fieldValue(control) {
  let value = control.type === "checkbox" ? control.checked : control.value.trim();
  if (control.dataset.case === "upper") value = value.toUpperCase();
  if (value === "") return undefined;
  if (control.dataset.type === "number") return Number(value);
  if (control.dataset.type === "boolean") return value === "true";
  if (control.dataset.type === "json") {
    // A document the page wrote (the policy Try a policy tried); should it not read, the API says what is wrong.
    try {
      return JSON.parse(value);
    } catch (error) {
      return value;
    }
  }
  return value;
}

function bodyOf(form, submitter) {
  const body = {};
  let endpoint = form.dataset.endpoint;
  const controls = Array.from(form.elements).filter((c) => c.name && !c.disabled && c.type !== "submit");
  if (submitter && submitter.name) controls.push(submitter);
  for (const control of controls) {
    const value = fieldValue(control);
    const slot = "{" + control.name + "}";
    if (endpoint.includes(slot)) endpoint = endpoint.replace(slot, encodeURIComponent(value === undefined ? "" : value));
    else if (value !== undefined) body[control.name] = value;
  }
  return { endpoint, body };
}

function confirmation(form) {
  const chosen = form.querySelector("select option:checked[data-confirm]");
  return (chosen && chosen.dataset.confirm) || form.dataset.confirm;
}

async function readBase(form) {
  if (!form.dataset.base) return {};
  const response = await fetch(form.dataset.base, { credentials: "same-origin", cache: "no-store" });
  if (!response.ok) return {};
  const current = await response.json();
  const keys = (form.dataset.baseKeys || "").split(" ").filter(Boolean);
  return Object.fromEntries(keys.filter((k) => k in current).map((k) => [k, current[k]]));
}

function markInvalid(form, errors) {
  if (!form.elements) return; // the automation checkbox has no fields to mark
  for (const control of form.elements) control.removeAttribute("aria-invalid");
  for (const error of errors || []) {
    const name = String(error.path || "").split("/")[1];
    const control = name && form.elements.namedItem(name);
    if (control && control.setAttribute) control.setAttribute("aria-invalid", "true");
  }
}

// The person is done with what they changed in `control` (a form, or the automation checkbox).
function settle(control) {
  for (const element of control.elements || [control]) edited.delete(element);
}

// Every change goes to the API this one way: the body merged over the resource it names (data-base), sent with the
// tag of what the page showed (data-if-match). `control` is an action form or the automation checkbox; a refusal is
// said beside it. Resolves to whether the change was made.
async function send(control, endpoint, method, body) {
  let response;
  let answer;
  try {
    const merged = { ...(await readBase(control)), ...body };
    response = await fetch(endpoint, {
      method,
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        // What the page shows: a change decided on an older version is refused (412), not applied over it.
        ...(control.dataset.ifMatch ? { "If-Match": control.dataset.ifMatch } : {}),
      },
      body: JSON.stringify(merged),
    });
    answer = await response.json().catch(() => null);
  } catch (error) {
    showProblem(control, "Could not reach the service: " + error.message);
    announce("Could not reach the service: " + error.message);
    return false;
  }
  if (response.status === 412) {
    await showStale(control, describeStale(answer, response));
    return false;
  }
  if (!response.ok) {
    const text = describeProblem(answer, response);
    markInvalid(control, answer && answer.errors);
    showProblem(control, text);
    announce("Refused: " + text);
    return false;
  }
  markInvalid(control, []);
  clearProblems();
  return true;
}

// A 412: someone changed the thing since this page showed it. Let go of the stale control (its menu closes), show
// the thing as it is now (the whole page: its own tag may be current where the control's was not), and say beside
// the control what happened meanwhile.
async function showStale(control, text) {
  const key = (control.closest("[data-key]") || control).dataset.key;
  const menu = control.closest("details");
  if (menu) menu.open = false;
  if (control.contains(document.activeElement)) document.activeElement.blur();
  settle(control);
  control.removeAttribute("aria-busy");
  await live.now({ whole: true });
  const holder = staleHolder(control, key);
  if (holder) {
    holder.textContent = text;
    holder.hidden = false;
  }
  announce("Refused: " + text);
}

async function submitAction(event) {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.classList.contains("api")) return;
  event.preventDefault();
  if (form.getAttribute("aria-busy") === "true") return;
  const question = confirmation(form);
  if (question && !window.confirm(question)) return;
  const { endpoint, body } = bodyOf(form, event.submitter);
  form.setAttribute("aria-busy", "true");
  showProblem(form, "");
  try {
    if (!(await send(form, endpoint, form.dataset.method || "POST", body))) return;
    if (form.hasAttribute("data-reset")) form.reset();
    settle(form);
    const menu = form.closest("details");
    if (form.hasAttribute("data-close") && menu) menu.open = false;
    // The control may be about to leave the page (a card moving to another column): let it go, and take the
    // focus to where the thing acted on stands once the page shows the change.
    const focusAfter = form.dataset.focusAfter;
    if (focusAfter && form.contains(document.activeElement)) document.activeElement.blur();
    announce(form.dataset.done || "Done.");
    if (form.dataset.goTo) {
      // The change is shown elsewhere (an adopted policy, on the decisions page): go there.
      window.location.assign(form.dataset.goTo);
      return;
    }
    form.removeAttribute("aria-busy");
    live.release(); // a round that came back while the form was on its way left it as it was: take all of it now
    await live.now();
    const target = focusAfter && document.querySelector(focusAfter);
    if (target) target.focus();
  } finally {
    form.removeAttribute("aria-busy");
    live.release();
  }
}

// The automation checkbox sends itself when changed; refused, it goes back to what the page shows.
async function toggleAutomation(event) {
  const box = event.target;
  const wanted = box.checked;
  showProblem(box, "");
  box.disabled = true;
  const made = await send(box, box.dataset.endpoint, "POST", { enabled: wanted });
  box.disabled = false;
  if (!made) {
    box.checked = box.defaultChecked;
    return;
  }
  announce("Writing automation is " + (wanted ? "on" : "off") + ".");
  live.release();
  await live.now();
}

// ---------------------------------------------------------------------------------------------------------
// Keeping current: the page asks for itself with If-None-Match every POLL_MS while the tab is visible. A 304
// changes nothing; a new page is merged into this one by idiomorph (vendored, `idiomorph.min.js`), so what the
// person is doing survives: the focused control, an open menu (<details>), a field they typed in, a form on its way,
// a refusal's message. Idiomorph matches elements up by the ids they hold, so every item of a list the page
// reorders carries one (a card, a Needs-you item, a bay, a decision, a ticket's action forms).

// Left exactly as it is: a control the person changed, a form on its way.
function held(node) {
  return edited.has(node) || (node.nodeType === Node.ELEMENT_NODE && node.getAttribute("aria-busy") === "true");
}

// A form the person has started to fill keeps the tag of what they saw when they started.
function hasEdits(node) {
  for (const control of edited) if (node.contains(control)) return true;
  return false;
}

// Not to be thrown away: it holds the focus, an open menu, a control the person changed or a form on its way.
function pinned(node) {
  if (node.nodeType !== Node.ELEMENT_NODE) return false;
  const active = document.activeElement;
  if (active && active !== document.body && node.contains(active)) return true;
  const inUse = "details[open], [aria-busy='true']";
  return node.matches(inUse) || node.querySelector(inUse) !== null || hasEdits(node);
}

// Merge the fresh page's <main> into this one, leaving what the person has in hand as they have it; returns whether
// the page now shows `fresh` in full.
function merge(main, fresh) {
  let complete = true;
  const leave = () => {
    complete = false;
    return false; // to idiomorph: do not touch it
  };
  Idiomorph.morph(main, fresh, {
    callbacks: {
      beforeNodeMorphed(old) {
        if (old.nodeType !== Node.ELEMENT_NODE) return true;
        if (old.classList.contains("problem")) return false; // the script's own message, until the next try
        return held(old) ? leave() : true;
      },
      // Gone from the fresh page but in use: it stays until the person is done with it.
      beforeNodeRemoved: (old) => (pinned(old) ? leave() : true),
      beforeAttributeUpdated(name, old) {
        if (name === "open" && old.nodeName === "DETAILS") return false; // whether a menu is open is the person's
        return !(name === "data-if-match" && hasEdits(old));
      },
    },
  });
  return complete;
}

// The page keeping itself current: the one owner of what its rounds share.
const live = (() => {
  let etag = null; // the tag of what the page shows; none: the page does not keep itself current
  let timer = null;
  let round = null; // the round on its way, which a caller may wait for
  let again = false; // asked for while a round was on its way (which may predate the caller's change): one more
  // The last merge left something as the person has it (a control they changed, an open menu, the focus, a form
  // on its way). The page takes the new tag all the same, so while they leave it so it asks at 304 cost; once they
  // let go of something (the focus moves, a menu closes, a form is sent or reset) the next round asks for the
  // whole page again and merges what was left.
  let behind = false;
  let letGo = false;

  async function refresh() {
    const main = document.getElementById("main");
    if (!main || !etag) return;
    const whole = behind && letGo;
    letGo = false;
    const headers = whole ? { Accept: "text/html" } : { "If-None-Match": etag, Accept: "text/html" };
    const response = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store", headers });
    if (response.status === 401 || response.status === 403 || response.status === 429) {
      // Asking again with credentials the service refuses would only count as more failed sign-ins (and lock
      // this address out): stop, and say so.
      etag = null;
      const note = document.getElementById("live-stopped");
      if (note) {
        note.textContent = "This page stopped keeping itself current (the service answered " + response.status + "). Reload it to sign in again.";
        note.hidden = false;
      }
      return;
    }
    if (response.status === 304 || !response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("main");
    if (!fresh) return;
    const complete = merge(main, fresh);
    for (const control of edited) if (!control.isConnected) edited.delete(control);
    etag = response.headers.get("ETag") || fresh.dataset.etag || etag;
    behind = !complete;
  }

  // Refresh now (`whole`: the whole page, not a 304); a call made while a round is on its way gets one more after
  // it. Resolves when the page shows what the service had when it was called.
  function now({ whole = false } = {}) {
    if (whole) behind = letGo = true;
    if (round) {
      again = true;
      return round;
    }
    round = (async () => {
      do {
        again = false;
        try {
          await refresh();
        } catch (e) {
          // a network hiccup: the next round tries again
        }
      } while (again);
      round = null;
    })();
    return round;
  }

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (document.visibilityState === "hidden" || !etag) return; // a hidden tab asks for nothing
    timer = setTimeout(async () => {
      await now();
      schedule();
    }, POLL_MS);
  }

  return {
    start(tag) {
      etag = tag;
      schedule();
    },
    release() {
      letGo = true;
    },
    now,
    schedule,
  };
})();

document.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("main");
  const box = document.getElementById("writing-automation");
  if (box) box.addEventListener("change", toggleAutomation);
  document.addEventListener("submit", submitAction);
  document.addEventListener("input", (event) => {
    const control = event.target;
    if (control.form && control.type !== "hidden") edited.add(control);
  });
  document.addEventListener("reset", (event) => {
    settle(event.target);
    live.release();
  });
  document.addEventListener("focusout", live.release);
  document.addEventListener("toggle", live.release, true); // a menu opened or closed (toggle does not bubble)
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") live.now().then(live.schedule);
    else live.schedule();
  });
  live.start(main && main.dataset.etag ? main.dataset.etag : null);
});
