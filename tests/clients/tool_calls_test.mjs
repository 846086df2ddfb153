// Tool calls and reasoning through the official OpenAI SDK against a real tesserad serving a
// random-weight model at temperature 1.0. The truth is independent of Tessera: JSON.parse,
// the JSON Schema validator Ajv (draft 2020-12 with ajv-formats), and the SDK's own stream
// helper (ChatCompletionStream), which assembles streamed tool-call deltas as OpenAI's
// protocol defines them.
//
// Two modes (TESSERA_TOOL_TEST):
//   tools      the daemon runs with a template that writes tool calls (e.g. --chat-template
//              glm4): forced calls (named and "required"), streamed and not, validate against
//              their schemas; a conversation sends the results back; 200 "auto" requests
//              return valid OpenAI shapes and no 5xx.
//   reasoning  the daemon's template opens <think> in its generation prompt: the output is
//              reasoning_content (streamed as delta.reasoning_content) and
//              usage.completion_tokens_details.reasoning_tokens counts it.
// Environment as in structured_output_test.mjs (TESSERA_URL, TESSERA_API_KEY, TESSERA_MODEL);
// TESSERA_FORCED_REQUESTS (default 50), TESSERA_AUTO_REQUESTS (default 200).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const baseURL = `${process.env.TESSERA_URL}/v1`;
const apiKey = process.env.TESSERA_API_KEY || 'unused';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 300_000 });
const mode = process.env.TESSERA_TOOL_TEST || 'tools';
const forcedRequests = Number(process.env.TESSERA_FORCED_REQUESTS || 50);
const autoRequests = Number(process.env.TESSERA_AUTO_REQUESTS || 200);
const concurrency = 8;

let modelName = process.env.TESSERA_MODEL || '';
async function model() {
  if (!modelName) modelName = (await client.models.list()).data[0].id;
  return modelName;
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// Parameters a random model can finish: strings and arrays bounded.
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather at a place',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', minLength: 1, maxLength: 16 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
          days: { type: 'integer', minimum: 1, maximum: 7 },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'create_event',
      description: 'Puts an event in the calendar',
      parameters: {
        type: 'object',
        properties: {
          title: { type: 'string', maxLength: 20 },
          date: { type: 'string', format: 'date' },
          attendees: { type: 'array', items: { type: 'string', format: 'email' }, maxItems: 2 },
          priority: { type: 'integer', minimum: 0, maximum: 3 },
          private: { type: 'boolean' },
        },
        required: ['title', 'date', 'priority'],
        additionalProperties: false,
      },
    },
  },
];
const validators = Object.fromEntries(
  tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

async function pool(count, make) {
  const results = new Array(count);
  let next = 0;
  async function worker() {
    while (next < count) {
      const i = next++;
      results[i] = await make(i);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return results;
}

function checkCall(call, allowed, where) {
  assert.equal(call.type, 'function', where);
  assert.ok(typeof call.id === 'string' && call.id.length > 0, `${where}: no id`);
  assert.ok(allowed.includes(call.function.name), `${where}: calls ${call.function.name}`);
  let args;
  assert.doesNotThrow(() => { args = JSON.parse(call.function.arguments); },
    `${where}: arguments are not JSON: ${call.function.arguments}`);
  const validate = validators[call.function.name];
  assert.ok(validate(args), `${where}: ${call.function.arguments}\n${ajv.errorsText(validate.errors)}`);
  return args;
}

// Non-streamed and streamed (the SDK's stream helper assembles the deltas) requests.
async function chat(params, stream) {
  if (!stream) return client.chat.completions.create(params);
  const s = client.chat.completions.stream({ ...params, stream_options: { include_usage: true } });
  return s.finalChatCompletion();
}

if (mode === 'tools') {
  test(`${forcedRequests} named forced calls at temperature 1.0, streamed and not, validate with Ajv`,
    async () => {
      const names = tools.map((t) => t.function.name);
      const responses = await pool(forcedRequests, async (i) => {
        const name = names[i % names.length];
        const r = await chat({
          model: await model(),
          messages: [{ role: 'user', content: `Please use ${name} (${i}).` }],
          tools,
          tool_choice: { type: 'function', function: { name } },
          temperature: 1.0,
          seed: 100 + i,
          max_tokens: 600,
        }, i % 2 === 1);
        return { name, r, i };
      });
      const distinct = new Set();
      for (const { name, r, i } of responses) {
        const where = `request ${i} (${name}, ${i % 2 ? 'streamed' : 'whole'})`;
        const choice = r.choices[0];
        assert.equal(choice.finish_reason, 'tool_calls', `${where}: ${JSON.stringify(choice)}`);
        // A named function is called exactly once.
        assert.equal(choice.message.tool_calls.length, 1, where);
        checkCall(choice.message.tool_calls[0], [name], where);
        assert.ok(!choice.message.content, `${where}: content ${choice.message.content}`);
        distinct.add(choice.message.tool_calls[0].function.arguments);
      }
      assert.ok(distinct.size > forcedRequests / 2, `only ${distinct.size} distinct calls`);
    });

  test('tool_choice "required" without parallel calls gives exactly one valid call', async () => {
    const responses = await pool(16, (i) => chat({
      model: modelName,
      messages: [{ role: 'user', content: `Do something useful (${i}).` }],
      tools,
      tool_choice: 'required',
      parallel_tool_calls: false,
      temperature: 1.0,
      seed: 300 + i,
      max_tokens: 600,
    }, i % 2 === 0));
    for (const [i, r] of responses.entries()) {
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', `request ${i}: ${JSON.stringify(choice)}`);
      assert.equal(choice.message.tool_calls.length, 1, `request ${i}`);
      checkCall(choice.message.tool_calls[0], ['get_weather', 'create_event'], `request ${i}`);
    }
  });

  test('tool_choice "required" with parallel calls: every returned call is valid', async () => {
    const responses = await pool(8, (i) => chat({
      model: modelName,
      messages: [{ role: 'user', content: `Several things (${i}).` }],
      tools,
      tool_choice: 'required',
      temperature: 1.0,
      seed: 400 + i,
      max_tokens: 400,
    }, i % 2 === 1));
    for (const [i, r] of responses.entries()) {
      const choice = r.choices[0];
      // A random model may go on calling until max_tokens: the complete calls still count.
      // A streamed call cut by max_tokens keeps the pieces it sent (not whole: its arguments
      // end early); a whole response returns the cut call as content.
      assert.ok(['tool_calls', 'length'].includes(choice.finish_reason), choice.finish_reason);
      const calls = choice.message.tool_calls || [];
      assert.ok(calls.length >= 1, `request ${i}: ${JSON.stringify(choice)}`);
      const cut = choice.finish_reason === 'length' && i % 2 === 1 ? 1 : 0;
      for (const call of calls.slice(0, calls.length - cut)) {
        checkCall(call, ['get_weather', 'create_event'], `request ${i}`);
      }
    }
  });

  test('a conversation sends the tool result back and continues', async () => {
    const messages = [{ role: 'user', content: 'What is the weather in Oslo?' }];
    const first = await client.chat.completions.create({
      model: modelName, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      temperature: 1.0, seed: 7, max_tokens: 300,
    });
    const call = first.choices[0].message.tool_calls[0];
    checkCall(call, ['get_weather'], 'first turn');
    messages.push(first.choices[0].message);
    messages.push({ role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' });
    for (const stream of [false, true]) {
      const next = await chat({
        model: modelName, messages, tools, temperature: 1.0, seed: 8, max_tokens: 24,
      }, stream);
      const choice = next.choices[0];
      assert.equal(choice.message.role, 'assistant');
      assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
      assert.ok(next.usage.prompt_tokens > first.usage.prompt_tokens, 'the history was rendered');
    }
  });

  test(`${autoRequests} "auto" requests: no 5xx, every response a valid OpenAI shape`, async () => {
    const responses = await pool(autoRequests, async (i) => {
      try {
        return await chat({
          model: modelName,
          messages: [{ role: 'user', content: `Maybe call a tool (${i}).` }],
          tools,
          temperature: 1.0,
          seed: 500 + i,
          max_tokens: 48,
        }, i % 4 === 3);
      } catch (e) {
        return { error: e };
      }
    });
    let calls = 0;
    for (const [i, r] of responses.entries()) {
      assert.ok(!r.error, `request ${i} failed: ${r.error}`);
      assert.equal(r.object, 'chat.completion');
      assert.equal(r.choices.length, 1);
      const { message, finish_reason: finish } = r.choices[0];
      assert.equal(message.role, 'assistant');
      assert.ok(['stop', 'length', 'tool_calls'].includes(finish), `request ${i}: ${finish}`);
      assert.ok(message.content === null || typeof message.content === 'string', `request ${i}`);
      for (const call of message.tool_calls || []) {
        // Unforced calls parse as JSON objects (the schema is the model's business).
        assert.equal(call.type, 'function');
        assert.ok(call.id && call.function.name, `request ${i}`);
        assert.equal(typeof JSON.parse(call.function.arguments), 'object');
        ++calls;
      }
      assert.ok(r.usage.completion_tokens > 0);
    }
    console.log(`# auto: ${responses.length} responses, ${calls} tool calls`);
  });
}

if (mode === 'reasoning') {
  test('a template that opens <think>: the output is reasoning, counted in usage', async () => {
    const params = {
      model: await model(),
      messages: [{ role: 'user', content: 'Think about it.' }],
      temperature: 1.0,
      seed: 11,
      max_tokens: 32,
      ignore_eos: true,
    };
    const r = await client.chat.completions.create(params);
    const m = r.choices[0].message;
    assert.ok(typeof m.reasoning_content === 'string' && m.reasoning_content.length > 0,
      JSON.stringify(m));
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, r.usage.completion_tokens,
      JSON.stringify(r.usage));

    // Streamed: reasoning arrives as delta.reasoning_content, and none of it as content.
    const stream = await client.chat.completions.create({ ...params, stream: true,
      stream_options: { include_usage: true } });
    let reasoning = '';
    let content = '';
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        reasoning += c.delta.reasoning_content || '';
        content += c.delta.content || '';
      }
    }
    assert.equal(reasoning, m.reasoning_content, 'the same seed streams the same reasoning');
    assert.equal(content, m.content || '');
    assert.equal(usage.completion_tokens_details.reasoning_tokens, usage.completion_tokens);

    // enable_thinking: false through chat_template_kwargs: no reasoning.
    const off = await client.chat.completions.create({
      ...params, chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(off.choices[0].message.reasoning_content, undefined, JSON.stringify(off.choices[0]));
    assert.equal(off.usage.completion_tokens_details.reasoning_tokens, 0);
  });

  test('structured output after reasoning: the constraint applies to the answer, not the thinking',
    async () => {
      const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'],
        additionalProperties: false };
      const format = { type: 'json_schema', json_schema: { name: 'r', schema, strict: true } };
      // Thinking on: the model thinks freely first (a random model never closes it: the
      // reasoning runs to max_tokens and nothing of it is forced into JSON).
      const on = await client.chat.completions.create({
        model: await model(), messages: [{ role: 'user', content: 'Answer in JSON.' }],
        temperature: 1.0, seed: 12, max_tokens: 24, response_format: format,
      });
      const m = on.choices[0].message;
      assert.equal(on.choices[0].finish_reason, 'length', JSON.stringify(on.choices[0]));
      assert.ok(m.reasoning_content.length > 0 && !m.reasoning_content.startsWith('{'),
        JSON.stringify(m));
      assert.ok(!m.content, JSON.stringify(m));
      // Thinking off: the answer follows the schema from its first token.
      const off = await client.chat.completions.create({
        model: modelName, messages: [{ role: 'user', content: 'Answer in JSON.' }],
        temperature: 1.0, seed: 12, max_tokens: 64, response_format: format,
        chat_template_kwargs: { enable_thinking: false },
      });
      assert.equal(off.choices[0].finish_reason, 'stop');
      assert.equal(typeof JSON.parse(off.choices[0].message.content).ok, 'boolean');
    });
}
