// The ifqa page: asks /search or /answer and draws every stage. Text goes into the page through
// textContent and created elements only (never innerHTML), so passages cannot inject markup.
"use strict";

const $ = (id) => document.getElementById(id);
let health = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value; else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function escapeRegex(word) { return word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

// The text with the question's words marked (a word and its simple inflections: coast, coasts, coastal).
function highlighted(text, terms) {
  const span = el("span");
  if (!terms.length) { span.textContent = text; return span; }
  const pattern = new RegExp("\\b(" + terms.map(escapeRegex).join("|") + ")\\w{0,3}\\b", "gi");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    span.append(text.slice(last, match.index), el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  span.append(text.slice(last));
  return span;
}

function setStatus(message, error = false) {
  $("status").textContent = message;
  $("status").className = error ? "error" : "";
}

function drawStages(result) {
  $("stages").hidden = false;
  const rerank = result.reranker ? `, then reranked by ${result.reranker.model} (top ${result.reranker.depth})` : "";
  $("formulation").textContent = `Query mode "${result.query_mode}" searched ${result.indexes.join(" + ")}${rerank} with:`;
  $("queries").replaceChildren(...result.queries.map((query) => el("li", {}, query)));
}

function drawPassages(result) {
  $("results").hidden = false;
  const known = result.known;
  $("known").textContent = known
    ? `A known question (${known.split}, id ${known.qid}); reference answers: ${known.answers.join(" | ")}.`
    : "Not a question of the loaded split: no gold or answer flags.";
  const items = result.passages.map((p) => {
    const meta = el("div", { class: "meta" }, el("span", {}, `#${p.rank}`), el("span", { class: "title" }, p.title || "(no title)"),
      el("span", {}, `score ${p.score}`));
    if (result.reranker) {
      const moved = p.first_stage_rank - p.rank;
      meta.append(el("span", { class: moved > 0 ? "up" : moved < 0 ? "down" : "" },
        `first stage #${p.first_stage_rank}${moved > 0 ? ` (up ${moved})` : moved < 0 ? ` (down ${-moved})` : ""}`));
    }
    if (p.gold) meta.append(el("span", { class: "badge gold" }, "gold passage"));
    if (p.has_answer) meta.append(el("span", { class: "badge answer" }, "has answer"));
    return el("li", { class: "passage", "data-id": p.id }, meta, el("p", { class: "text" }, highlighted(p.text, result.terms)));
  });
  $("passages").replaceChildren(...items);
}

function drawAnswer(result) {
  const a = result.answer;
  const verdict = a.correct === undefined ? null
    : el("span", { class: "verdict " + (a.correct ? "right" : "wrong") }, a.correct ? " (matches the reference)" : " (does not match the reference)");
  const parts = [el("p", {}, el("span", { class: "prediction", id: "prediction" }, a.prediction || "(no answer)"), verdict),
    el("p", { class: "meta" }, `${a.model}, mode ${a.mode}, ${a.passages_in_prompt} passages and ${a.demos} demonstrations in the prompt, ${a.seconds}s`)];
  if (a.reasoning) parts.push(el("h3", {}, "Reasoning"), el("pre", {}, a.reasoning));
  if (a.background) parts.push(el("h3", {}, "Generated background"), el("pre", {}, a.background));
  parts.push(el("details", {}, el("summary", {}, "The prompt the reader saw"), el("pre", { id: "prompt" }, a.prompt)));
  $("answer").replaceChildren(...parts);
}

function drawNoReader(message) {
  const command = message.split(": ").slice(1).join(": ");
  $("answer").replaceChildren(el("p", {}, "No reader is configured on this server, so only retrieval is shown. Start one with:"),
    el("pre", {}, command || message));
}

async function post(path, body) {
  const response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  return { ok: response.ok, status: response.status, data };
}

async function ask(action) {
  const question = $("question").value.trim();
  if (!question) { setStatus("Type a question first.", true); return; }
  const k = Number($("k").value);
  for (const button of document.querySelectorAll("form button")) button.disabled = true;
  setStatus(action === "answer" ? "Retrieving and reading..." : "Retrieving...");
  try {
    const wantsAnswer = action === "answer" && health && health.reader;
    const { ok, status, data } = await post(wantsAnswer ? "/answer" : "/search", { question, k });
    if (!ok) { setStatus(data.error || `HTTP ${status}`, true); return; }
    drawStages(data);
    drawPassages(data);
    $("reader").hidden = action !== "answer";
    if (wantsAnswer) drawAnswer(data);
    else if (action === "answer") drawNoReader(health ? health.reader_hint : "");
    setStatus(`Done in ${(data.seconds + (data.answer ? data.answer.seconds : 0)).toFixed(2)} s.`);
  } catch (error) {
    setStatus(`The server did not answer: ${error}`, true);
  } finally {
    for (const button of document.querySelectorAll("form button")) button.disabled = false;
  }
}

async function start() {
  $("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    ask(event.submitter ? event.submitter.value : "search");
  });
  try {
    health = await (await fetch("/health")).json();
    const reader = health.reader ? `Reader: ${health.reader.model} (${health.reader.mode}).` : "No reader configured (search only).";
    $("setup").textContent = `Index: ${health.indexes.map((i) => `${i.name} (${i.passages} passages)`).join(" + ")}. ${reader}`;
    const examples = (await (await fetch("/examples")).json()).questions;
    $("examples").append(...examples.map((q) => {
      const button = el("button", { type: "button", class: "example" }, q);
      button.addEventListener("click", () => { $("question").value = q; ask(health.reader ? "answer" : "search"); });
      return button;
    }));
  } catch (error) {
    setStatus(`Cannot reach the server: ${error}`, true);
  }
}

start();
