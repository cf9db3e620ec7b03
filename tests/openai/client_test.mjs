// Checks tessera serve's OpenAI wire format with the official `openai` npm
// client (pinned in package.json): models, completions and chat completions,
// streamed and not, n > 1, errors as the SDK's error classes, greedy
// determinism, structured output (response_format json_object and
// json_schema), function calling (tools, tool_choice). Every request is one a user of the SDK would write; the SDK
// parses the responses, so a missing field, a wrong type or a broken SSE
// frame shows up here as it would in an application.
//
// Environment: BASE_URL (http://127.0.0.1:PORT, no /v1), MODEL (the served
// model name). Prints one line per check; exits 0 when all pass, 1 if any
// fails, 2 on bad usage.
import assert from "node:assert/strict";
import OpenAI from "openai";

const BASE_URL = process.env.BASE_URL;
const MODEL = process.env.MODEL;
if (!BASE_URL || !MODEL) {
  console.error("client_test: set BASE_URL (http://host:port) and MODEL");
  process.exit(2);
}

// No retries: a 5xx or a dropped connection must fail the check that caused
// it, not be hidden by the SDK's retry loop.
const client = new OpenAI({
  baseURL: BASE_URL + "/v1",
  apiKey: "unused",
  maxRetries: 0,
  timeout: 60_000,
});

const MAX_TOKENS = 8;
const PROMPT = "The quick brown fox";
const MESSAGES = [
  { role: "system", content: "You are a terse assistant." },
  { role: "user", content: "Name three colours." },
];

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (err) {
    failures++;
    console.log(`FAIL ${name}`);
    console.log("     " + String(err?.stack ?? err).split("\n").join("\n     "));
  }
}

/// Runs `fn`, which must reject; returns what it rejected with.
async function rejection(fn) {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  assert.fail("the request succeeded; expected an error");
}

/// Collects a stream of chunks (and checks each one's common fields).
async function collect(stream, object) {
  const chunks = [];
  for await (const chunk of stream) {
    assert.equal(chunk.object, object, "chunk.object");
    assert.equal(typeof chunk.id, "string", "chunk.id");
    assert.equal(chunk.model, MODEL, "chunk.model");
    assert.equal(typeof chunk.created, "number", "chunk.created");
    assert.ok(Array.isArray(chunk.choices), "chunk.choices is an array");
    chunks.push(chunk);
  }
  assert.ok(chunks.length > 0, "the stream had chunks");
  assert.ok(chunks.every((c) => c.id === chunks[0].id), "one id for every chunk");
  return chunks;
}

function completionRequest(extra = {}) {
  return { model: MODEL, prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0, ...extra };
}

function chatRequest(extra = {}) {
  return { model: MODEL, messages: MESSAGES, max_tokens: MAX_TOKENS, temperature: 0, ...extra };
}

await check("models.list() lists the served model", async () => {
  const ids = [];
  for await (const m of client.models.list()) {
    assert.equal(m.object, "model");
    assert.equal(typeof m.created, "number");
    assert.equal(typeof m.owned_by, "string");
    ids.push(m.id);
  }
  assert.ok(ids.includes(MODEL), `${MODEL} in ${JSON.stringify(ids)}`);
});

await check("models.retrieve() returns the served model, NotFoundError for another", async () => {
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, "model");
  assert.equal(typeof m.created, "number");
  const err = await rejection(() => client.models.retrieve("no-such-model"));
  assert.ok(err instanceof OpenAI.NotFoundError, `got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.code, "model_not_found");
});

let greedyText;
await check("completions.create: one choice, finish_reason length, usage", async () => {
  const r = await client.completions.create(completionRequest());
  assert.equal(r.object, "text_completion");
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(typeof c.text, "string");
  assert.equal(c.finish_reason, "length");
  assert.equal(r.usage.completion_tokens, MAX_TOKENS);
  assert.ok(r.usage.prompt_tokens > 0, "usage.prompt_tokens > 0");
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  greedyText = c.text;
});

await check("completions.create (greedy) twice gives the same text", async () => {
  const r = await client.completions.create(completionRequest());
  assert.equal(typeof greedyText, "string", "the first completion succeeded");
  assert.equal(r.choices[0].text, greedyText);
});

await check("completions.create stream: the streamed text equals the non-streamed text", async () => {
  const stream = await client.completions.create(
    completionRequest({ stream: true, stream_options: { include_usage: true } }));
  const chunks = await collect(stream, "text_completion");
  let text = "";
  const finishes = [];
  let usage;
  for (const c of chunks) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      assert.equal(ch.index, 0);
      assert.equal(typeof ch.text, "string");
      text += ch.text;
      if (ch.finish_reason != null) finishes.push(ch.finish_reason);
    }
  }
  assert.deepEqual(finishes, ["length"]);
  assert.equal(usage?.completion_tokens, MAX_TOKENS, "usage chunk");
  assert.equal(text, greedyText);
});

let streamedChat;
await check("chat.completions.create stream: role first, content, one finish, usage", async () => {
  const stream = await client.chat.completions.create(
    chatRequest({ stream: true, stream_options: { include_usage: true } }));
  const chunks = await collect(stream, "chat.completion.chunk");
  assert.match(chunks[0].id, /^chatcmpl-/);
  assert.equal(chunks[0].choices.length, 1, "the first chunk has a choice");
  assert.equal(chunks[0].choices[0].delta.role, "assistant", "the first delta's role");
  let content = "";
  const finishes = [];
  const usageChunks = [];
  for (const c of chunks) {
    if (c.usage) usageChunks.push(c);
    for (const ch of c.choices) {
      assert.equal(ch.index, 0);
      if (ch.delta.content != null) {
        assert.equal(typeof ch.delta.content, "string");
        content += ch.delta.content;
      }
      if (ch.finish_reason != null) finishes.push(ch.finish_reason);
    }
  }
  assert.deepEqual(finishes, ["length"], "exactly one finish_reason");
  assert.equal(usageChunks.length, 1, "exactly one chunk with usage");
  const u = usageChunks[0];
  assert.equal(u, chunks[chunks.length - 1], "the usage chunk comes last");
  assert.deepEqual(u.choices, [], "the usage chunk has no choices");
  assert.equal(u.usage.completion_tokens, MAX_TOKENS);
  assert.ok(u.usage.prompt_tokens > 0);
  assert.equal(u.usage.total_tokens, u.usage.prompt_tokens + u.usage.completion_tokens);
  streamedChat = content;
});

await check("chat.completions.create (greedy): the same content as streamed", async () => {
  const r = await client.chat.completions.create(chatRequest());
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, "assistant");
  assert.equal(typeof c.message.content, "string");
  assert.equal(c.finish_reason, "length");
  assert.equal(r.usage.completion_tokens, MAX_TOKENS);
  assert.equal(typeof streamedChat, "string", "the streamed chat succeeded");
  assert.equal(c.message.content, streamedChat);
});

await check("chat.completions.create n=2 with a seed: choices 0 and 1", async () => {
  const r = await client.chat.completions.create(
    chatRequest({ n: 2, seed: 1234, temperature: 1.0 }));
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
  for (const c of r.choices) {
    assert.equal(c.message.role, "assistant");
    assert.equal(typeof c.message.content, "string");
    assert.ok(["length", "stop"].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
  }
  assert.ok(r.usage.completion_tokens <= 2 * MAX_TOKENS);
  // The same seed again gives the same choices.
  const again = await client.chat.completions.create(
    chatRequest({ n: 2, seed: 1234, temperature: 1.0 }));
  const contents = (x) => x.choices.slice().sort((a, b) => a.index - b.index).map((c) => c.message.content);
  assert.deepEqual(contents(again), contents(r), "same seed, same choices");
});

await check("a bad request (max_tokens -1) rejects with BadRequestError 400", async () => {
  const err = await rejection(() => client.completions.create(completionRequest({ max_tokens: -1 })));
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, 400);
  assert.equal(typeof err.error?.message, "string", "the error body's message");
  assert.equal(err.error?.param, "max_tokens");
});

await check("a bad streaming chat request rejects with BadRequestError 400", async () => {
  const err = await rejection(() =>
    client.chat.completions.create(chatRequest({ max_tokens: -1, stream: true })));
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, 400);
});

await check("an unknown model rejects with NotFoundError 404", async () => {
  const err = await rejection(() =>
    client.chat.completions.create(chatRequest({ model: "no-such-model" })));
  assert.ok(err instanceof OpenAI.NotFoundError, `got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, 404);
  assert.equal(err.code, "model_not_found");
});

// Structured output: the grammar holds the model (random weights here) to
// the format, so these parse whatever the weights say. max_tokens leaves
// room to close the document.
await check("chat json_object: the content parses as a JSON object", async () => {
  const r = await client.chat.completions.create(
    chatRequest({ max_tokens: 64, temperature: 0.8, seed: 5, response_format: { type: "json_object" } }));
  const content = r.choices[0].message.content;
  const v = JSON.parse(content);
  assert.equal(typeof v, "object", content);
  assert.ok(v !== null && !Array.isArray(v), `an object: ${content}`);
});

const PERSON = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    age: { type: "integer" },
    colour: { enum: ["red", "green", "blue"] },
  },
  required: ["name", "age", "colour"],
  additionalProperties: false,
};

await check("chat json_schema (strict) streamed: the deltas join into a valid document", async () => {
  const stream = await client.chat.completions.create(chatRequest({
    max_tokens: 96,
    stream: true,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: PERSON } },
  }));
  const chunks = await collect(stream, "chat.completion.chunk");
  let content = "";
  for (const c of chunks) for (const ch of c.choices) content += ch.delta?.content ?? "";
  const v = JSON.parse(content);
  assert.deepEqual(Object.keys(v), ["name", "age", "colour"], content);
  assert.equal(typeof v.name, "string");
  assert.ok(v.name.length <= 12, content);
  assert.ok(Number.isInteger(v.age), content);
  assert.ok(["red", "green", "blue"].includes(v.colour), content);
});

await check("completions json_schema: an unsupported keyword is a BadRequestError naming it", async () => {
  const err = await rejection(() => client.completions.create(completionRequest({
    response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "integer", minimum: 1 } } },
  })));
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.error?.param, "response_format.json_schema.schema");
  assert.match(err.error?.message, /minimum/);
});

// Function calling. A required or named tool_choice constrains the output
// to the call's schema, so these hold whatever the weights say.
const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};
const TOOL_MESSAGES = [{ role: "user", content: "What is the weather in Oslo?" }];

function checkWeatherCall(call) {
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  assert.equal(call.function.name, "get_weather");
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args), ["city", "unit"], call.function.arguments);
  assert.equal(typeof args.city, "string");
  assert.ok(args.city.length <= 12, call.function.arguments);
  assert.ok(["celsius", "fahrenheit"].includes(args.unit), call.function.arguments);
}

await check("chat tools, tool_choice required: message.tool_calls with valid arguments", async () => {
  const r = await client.chat.completions.create(chatRequest({
    messages: TOOL_MESSAGES, max_tokens: 96, temperature: 0.8, seed: 3,
    tools: [WEATHER_TOOL], tool_choice: "required",
  }));
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.ok(c.message.tool_calls.length >= 1, JSON.stringify(c.message));
  for (const call of c.message.tool_calls) checkWeatherCall(call);
});

await check("chat tools, named tool_choice streamed: delta.tool_calls join into the call", async () => {
  const req = chatRequest({
    messages: TOOL_MESSAGES, max_tokens: 96,
    tools: [WEATHER_TOOL], tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  const whole = await client.chat.completions.create(req);
  assert.equal(whole.choices[0].message.tool_calls.length, 1);
  checkWeatherCall(whole.choices[0].message.tool_calls[0]);
  const chunks = await collect(await client.chat.completions.create({ ...req, stream: true }),
    "chat.completion.chunk");
  let id = null, name = null, args = "", finish = null;
  for (const chunk of chunks)
    for (const ch of chunk.choices) {
      for (const t of ch.delta?.tool_calls ?? []) {
        assert.equal(t.index, 0);
        if (t.id) { assert.equal(id, null, "one id"); id = t.id; name = t.function.name; }
        assert.notEqual(id, null, "the id and name come first");
        args += t.function?.arguments ?? "";
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  assert.equal(finish, "tool_calls");
  assert.equal(name, "get_weather");
  assert.equal(args, whole.choices[0].message.tool_calls[0].function.arguments);
  // The SDK's own stream helper assembles the same call.
  if (typeof client.chat.completions.stream === "function") {
    const final = await client.chat.completions.stream(req).finalChatCompletion();
    assert.equal(final.choices[0].message.tool_calls[0].function.arguments, args);
  }
});

await check("chat with an earlier tool call and its result, tool_choice auto: a well-formed answer", async () => {
  const r = await client.chat.completions.create(chatRequest({
    max_tokens: 16, tools: [WEATHER_TOOL],
    messages: [...TOOL_MESSAGES,
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
        function: { name: "get_weather", arguments: '{"city":"Oslo","unit":"celsius"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "-3" }],
  }));
  const c = r.choices[0];
  assert.ok(["stop", "length", "tool_calls"].includes(c.finish_reason), c.finish_reason);
  for (const call of c.message.tool_calls ?? []) checkWeatherCall(call);
});

await check("chat tools: a bad function name is a BadRequestError naming the field", async () => {
  const err = await rejection(() => client.chat.completions.create(chatRequest({
    tools: [{ type: "function", function: { name: "bad name\"" } }],
  })));
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.error?.param, "tools[0].function.name");
});

if (failures > 0) {
  console.log(`client_test: ${failures} check(s) failed`);
  process.exit(1);
}
console.log("client_test: all checks passed");
