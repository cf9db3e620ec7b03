// Checks what curl saved from tessera serve, byte for byte as it came off
// the wire (no client library in between).
//
//   node check_curl_output.mjs completion BODY_FILE MODEL MAX_TOKENS
//     A non-streaming /v1/completions body: JSON, one choice with string
//     text, usage.completion_tokens == MAX_TOKENS.
//   node check_curl_output.mjs chat-sse BODY_FILE MODEL MAX_TOKENS
//     A streamed /v1/chat/completions body (stream_options.include_usage):
//     every event is one `data: ` line followed by a blank line; every data
//     but the last parses as a JSON chunk; the last is `data: [DONE]`; the
//     first chunk's delta has role assistant, one chunk has a finish_reason,
//     the usage chunk has completion_tokens == MAX_TOKENS.
//
// Prints what it checked; exits 0 when all hold, 1 otherwise.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const [mode, file, model, maxTokensText] = process.argv.slice(2);
const maxTokens = Number(maxTokensText);
const body = readFileSync(file, "utf8");

function completion() {
  const r = JSON.parse(body);
  assert.equal(r.object, "text_completion");
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, "string");
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, maxTokens);
  return `completion: ${JSON.stringify(r.choices[0].text)}, usage ${JSON.stringify(r.usage)}`;
}

function chatSse() {
  assert.ok(body.endsWith("data: [DONE]\n\n"), `the body ends with "data: [DONE]\\n\\n": ...${JSON.stringify(body.slice(-40))}`);
  // SSE events are separated by a blank line; each of ours is one data line.
  const events = body.split("\n\n");
  assert.equal(events.pop(), "", "nothing after the last event");
  const datas = events.map((e, i) => {
    assert.ok(e.startsWith("data: ") && !e.includes("\n"), `event ${i} is one data line: ${JSON.stringify(e)}`);
    return e.slice("data: ".length);
  });
  assert.equal(datas.pop(), "[DONE]", "the last event is [DONE]");
  assert.ok(!datas.includes("[DONE]"), "[DONE] only once, at the end");
  const chunks = datas.map((d, i) => {
    try {
      return JSON.parse(d);
    } catch (err) {
      assert.fail(`event ${i} is not JSON (${err.message}): ${d}`);
    }
  });
  assert.ok(chunks.length >= 2, "a role chunk and a usage chunk at least");
  for (const c of chunks) {
    assert.equal(c.object, "chat.completion.chunk");
    assert.equal(c.model, model);
    assert.equal(c.id, chunks[0].id);
  }
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  const finishes = chunks.flatMap((c) => c.choices).map((ch) => ch.finish_reason).filter((f) => f != null);
  assert.deepEqual(finishes, ["length"]);
  const usage = chunks.filter((c) => c.usage);
  assert.equal(usage.length, 1, "one usage chunk");
  assert.equal(usage[0].usage.completion_tokens, maxTokens);
  const text = chunks.flatMap((c) => c.choices).map((ch) => ch.delta.content ?? "").join("");
  return `chat-sse: ${chunks.length} JSON chunks + [DONE], content ${JSON.stringify(text)}`;
}

try {
  const modes = { completion, "chat-sse": chatSse };
  assert.ok(mode in modes, `unknown mode ${mode}`);
  console.log(`ok   curl ${modes[mode]()}`);
} catch (err) {
  console.log(`FAIL curl ${mode}: ${err.message}`);
  console.log(`     body: ${body.length > 2000 ? body.slice(0, 2000) + "..." : body}`);
  process.exit(1);
}
