// The official OpenAI SDK against Tessera's REST gateway: chat and completions, streaming and
// not, with usage; error bodies that parse as OpenAI.APIError with the right status.
//
// Environment: TESSERA_URL (http://host:port), TESSERA_API_KEY (empty: the server has none),
// TESSERA_MODEL (default: the
// first of /v1/models), TESSERA_EXPECT_ECHO=1 when the server runs the scripted echo engine
// (then generated texts are checked exactly: the engine generates its prompt back).
// Run through run_openai_sdk_test.sh.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

const baseURL = `${process.env.TESSERA_URL}/v1`;
// Empty: the server runs without a key (the wrong-key test is skipped).
const apiKey = process.env.TESSERA_API_KEY || 'unused';
const keyed = Boolean(process.env.TESSERA_API_KEY);
const echo = process.env.TESSERA_EXPECT_ECHO === '1';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

let modelName = process.env.TESSERA_MODEL || '';
async function model() {
  if (!modelName) {
    const page = await client.models.list();
    modelName = page.data[0].id;
  }
  return modelName;
}

function checkUsage(usage) {
  assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0);
  assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens >= 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  // OpenAI's prefix-cache field: whole KV blocks of the prompt served from the cache.
  const cached = usage.prompt_tokens_details.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached < usage.prompt_tokens);
}

// The scripted engine's chat template applied to one user message.
const rendered = (content) => `<|user|>${content}\n<|assistant|>`;

test('models.list and models.retrieve', async () => {
  const page = await client.models.list();
  assert.ok(page.data.length >= 1);
  const m = page.data[0];
  assert.equal(m.object, 'model');
  assert.equal(typeof m.id, 'string');
  assert.equal(m.owned_by, 'tessera');
  const one = await client.models.retrieve(m.id);
  assert.equal(one.id, m.id);
});

test('chat completion', async () => {
  const r = await client.chat.completions.create({
    model: await model(),
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 64,
    temperature: 0,
  });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, await model());
  assert.ok(Number.isInteger(r.created));
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  checkUsage(r.usage);
  if (echo) {
    assert.equal(c.message.content, rendered('Hi'));
    assert.equal(c.finish_reason, 'stop');
    assert.deepEqual(r.usage, {
      prompt_tokens: 24, completion_tokens: 24, total_tokens: 48,
      prompt_tokens_details: { cached_tokens: 0 },
    });
  }
});

test('chat completion, streamed, with usage', async () => {
  const stream = await client.chat.completions.create({
    model: await model(),
    messages: [{ role: 'user', content: 'Hello there' }],
    max_tokens: 16,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.match(chunk.id, /^chatcmpl-/);
    if (chunk.usage) {
      assert.equal(chunk.choices.length, 0);
      usage = chunk.usage;
      continue;
    }
    const d = chunk.choices[0].delta;
    if (d.role) role = d.role;
    if (d.content) text += d.content;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.ok(chunks >= 3);
  assert.equal(role, 'assistant');
  assert.ok(['stop', 'length'].includes(finish));
  assert.ok(usage, 'the last chunk carries usage');
  checkUsage(usage);
  assert.ok(usage.completion_tokens <= 16);
  if (echo) {
    assert.equal(text, rendered('Hello there').slice(0, 16));
    assert.equal(finish, 'length');
    assert.equal(usage.completion_tokens, 16);
  }
});

test('chat completion with logprobs and n', async () => {
  const r = await client.chat.completions.create({
    model: await model(),
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 4,
    n: 2,
    seed: 7,
    logprobs: true,
    top_logprobs: 2,
  });
  assert.equal(r.choices.length, 2);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1]);
  for (const c of r.choices) {
    const content = c.logprobs.content;
    assert.ok(content.length >= 1 && content.length <= 4);
    for (const e of content) {
      assert.equal(typeof e.token, 'string');
      assert.ok(e.logprob <= 0);
      assert.ok(Array.isArray(e.bytes));
      assert.equal(e.top_logprobs.length, 2);
    }
  }
  if (echo) assert.equal(r.choices[0].logprobs.content[0].token, '<');
});

test('completion', async () => {
  const r = await client.completions.create({
    model: await model(),
    prompt: 'The quick brown fox',
    max_tokens: 8,
    logprobs: 1,
  });
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.text_offset.length, lp.tokens.length);
  checkUsage(r.usage);
  if (echo) {
    assert.equal(r.choices[0].text, 'The quic');
    assert.deepEqual(r.usage, {
      prompt_tokens: 20, completion_tokens: 8, total_tokens: 28,
      prompt_tokens_details: { cached_tokens: 0 },
    });
  }
});

test('completion, streamed, with usage', async () => {
  const stream = await client.completions.create({
    model: await model(),
    prompt: 'abc',
    max_tokens: 32,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(usage);
  checkUsage(usage);
  assert.ok(['stop', 'length'].includes(finish));
  if (echo) {
    assert.equal(text, 'abc');
    assert.equal(finish, 'stop');
    assert.deepEqual(usage, {
      prompt_tokens: 4, completion_tokens: 3, total_tokens: 7,
      prompt_tokens_details: { cached_tokens: 0 },
    });
  }
});

test('a bad request is a 400 OpenAI.BadRequestError naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: await model(),
      messages: [{ role: 'user', content: 'Hi' }],
      temperature: 5,
    }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError, `not an APIError: ${err}`);
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.status, 400);
      assert.equal(err.param, 'temperature');
      assert.equal(err.type, 'invalid_request_error');
      assert.match(err.message, /temperature/);
      return true;
    },
  );
  await assert.rejects(
    client.completions.create({ model: await model(), prompt: 'x', max_tokens: -1 }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'max_tokens',
  );
});

test('an unknown model is a 404 OpenAI.NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === 'model_not_found',
  );
});

test('a wrong API key is a 401 OpenAI.AuthenticationError', { skip: !keyed && 'no API key set' }, async () => {
  const bad = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, `not an AuthenticationError: ${err}`);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_api_key');
    return true;
  });
});

test('leaving a stream mid-way leaves the server serving', async () => {
  const stream = await client.chat.completions.create({
    model: await model(),
    messages: [{ role: 'user', content: 'a prompt long enough to leave in the middle' }],
    max_tokens: 64,
    stream: true,
  });
  let seen = 0;
  // Breaking out of the loop aborts the HTTP response (the SDK closes the connection).
  for await (const chunk of stream) {
    void chunk;
    if (++seen === 3) break;
  }
  assert.equal(seen, 3);
  const r = await client.completions.create({ model: await model(), prompt: 'ok', max_tokens: 2 });
  assert.equal(r.choices.length, 1);
  if (echo) assert.equal(r.choices[0].text, 'ok');
});
