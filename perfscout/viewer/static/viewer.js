// perfscout viewer: live progress, state written on demand, the fork form's slot picker.
// No inline script anywhere (the pages' Content-Security-Policy runs this file only).
"use strict";

function text(el, value) { if (el) { el.textContent = value === null || value === undefined ? "–" : String(value); } }

function follow(live) {
  const run = live.dataset.run;
  let latest = live.dataset.latest;
  let wasRunning = true;
  const tick = async () => {
    let doc;
    try {
      const res = await fetch("/api/runs/" + encodeURIComponent(run) + "/progress", {credentials: "same-origin"});
      if (!res.ok) { return; }
      doc = await res.json();
    } catch (e) { return; }
    text(live.querySelector(".done"), doc.done);
    text(live.querySelector(".todo"), doc.todo);
    text(live.querySelector(".calls"), doc.calls);
    text(live.querySelector(".current"), doc.current);
    const job = doc.job && doc.job.state === "running" ? " · " + doc.job.kind + " running, last node " + (doc.job.last_node || "–") : "";
    text(live.querySelector(".state"), "live: " + doc.status + (doc.next.length ? " · next " + doc.next.join(", ") : "") + job);
    text(document.getElementById("status"), doc.status);
    const running = doc.status === "running" || (doc.job && doc.job.state === "running");
    if (doc.latest !== latest && !running) { window.location.reload(); return; }
    latest = doc.latest;
    if (!running && !wasRunning && doc.status !== "incomplete") { return; }
    wasRunning = running;
    window.setTimeout(tick, 1000);
  };
  window.setTimeout(tick, 500);
}

function lazyWrites(details) {
  details.addEventListener("toggle", async () => {
    if (!details.open || details.dataset.loaded) { return; }
    details.dataset.loaded = "1";
    const res = await fetch(details.dataset.src, {credentials: "same-origin"});
    const html = await res.text();
    // the fragment is the server's own escaped rendering (same origin, autoescaped template)
    const doc = new DOMParser().parseFromString(html, "text/html");
    const body = doc.querySelector("main") || doc.body;
    details.querySelectorAll("p.sub").forEach((p) => p.remove());
    Array.from(body.childNodes).forEach((n) => details.appendChild(document.importNode(n, true)));
  });
}

function forkForm() {
  const select = document.getElementById("fork-slot");
  const area = document.getElementById("fork-value");
  const data = document.getElementById("fork-slots");
  if (!select || !area || !data) { return; }
  const slots = JSON.parse(data.textContent);
  select.addEventListener("change", () => { area.value = slots[select.value] || "null"; });
}

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live && live.dataset.live === "1") { follow(live); }
  document.querySelectorAll("details[data-src]").forEach(lazyWrites);
  forkForm();
});
