// Structured output through the official OpenAI SDK against a real tesserad serving a
// random-weight model at temperature 1.0: every answer must be valid by construction. The
// truth is independent of Tessera: JSON.parse, and the JSON Schema validator Ajv (draft
// 2020-12, with ajv-formats for date / time / date-time / uuid / email), JavaScript's RegExp.
//
// Environment: TESSERA_URL (http://host:port), TESSERA_API_KEY (empty: no key),
// TESSERA_MODEL (default: the first of /v1/models), TESSERA_SO_REQUESTS (schema requests in
// all, default 100). Run through run_openai_sdk_test.sh --test structured_output_test.mjs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const baseURL = `${process.env.TESSERA_URL}/v1`;
const apiKey = process.env.TESSERA_API_KEY || 'unused';
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 300_000 });
const totalRequests = Number(process.env.TESSERA_SO_REQUESTS || 100);
const concurrency = 8;

let modelName = process.env.TESSERA_MODEL || '';
async function model() {
  if (!modelName) modelName = (await client.models.list()).data[0].id;
  return modelName;
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// Schemas whose documents a random model finishes: strings, arrays and recursion bounded.
const schemas = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 130 },
      email: { type: 'string', format: 'email' },
      address: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 16 },
          zip: { type: 'string', pattern: '^[0-9]{5}$' },
        },
        required: ['city', 'zip'],
        additionalProperties: false,
      },
    },
    required: ['name', 'age', 'address'],
    additionalProperties: false,
  },
  bounded_array: {
    type: 'object',
    properties: {
      tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, minItems: 2, maxItems: 4 },
      scores: { type: 'array', items: { type: 'integer', minimum: -5, maximum: 5 }, maxItems: 3 },
      pair: { type: 'array', prefixItems: [{ type: 'boolean' }, { const: 'x' }], items: false },
    },
    required: ['tags', 'scores', 'pair'],
    additionalProperties: false,
  },
  enums: {
    type: 'object',
    properties: {
      status: { enum: ['active', 'inactive', 'banned', null, 42] },
      level: { type: 'string', enum: ['low', 'mid', 'high'] },
      flag: { type: ['boolean', 'null'] },
      when: { type: 'string', format: 'date' },
      id: { type: 'string', format: 'uuid' },
    },
    required: ['status', 'level', 'flag', 'when', 'id'],
    additionalProperties: false,
  },
  tree: {
    $ref: '#/$defs/node',
    $defs: {
      node: {
        type: 'object',
        properties: {
          v: { type: 'integer', minimum: 0, maximum: 9 },
          kids: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 },
        },
        required: ['v', 'kids'],
        additionalProperties: false,
      },
    },
  },
  any_of: {
    type: 'object',
    properties: {
      shape: {
        anyOf: [
          {
            type: 'object',
            properties: { kind: { const: 'circle' }, r: { type: 'integer', minimum: 1, maximum: 99 } },
            required: ['kind', 'r'],
            additionalProperties: false,
          },
          {
            type: 'object',
            properties: { kind: { const: 'square' }, side: { type: 'integer', minimum: 1, maximum: 99 } },
            required: ['kind', 'side'],
            additionalProperties: false,
          },
        ],
      },
      note: { anyOf: [{ type: 'string', maxLength: 8 }, { type: 'null' }] },
    },
    required: ['shape', 'note'],
    additionalProperties: false,
  },
};

// Runs `count` requests made by `make(i)`, `concurrency` at a time.
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

test(`${totalRequests} json_schema requests at temperature 1.0 validate with Ajv`, async () => {
  const names = Object.keys(schemas);
  const validators = Object.fromEntries(names.map((n) => [n, ajv.compile(schemas[n])]));
  const responses = await pool(totalRequests, async (i) => {
    const name = names[i % names.length];
    const r = await client.chat.completions.create({
      model: await model(),
      messages: [{ role: 'user', content: `Give me a ${name} as JSON (${i}).` }],
      temperature: 1.0,
      seed: 1000 + i,
      max_tokens: 1500,
      response_format: {
        type: 'json_schema',
        json_schema: { name, schema: schemas[name], strict: true },
      },
    });
    return { name, r };
  });
  const distinct = new Set();
  for (const { name, r } of responses) {
    const choice = r.choices[0];
    const content = choice.message.content;
    assert.equal(choice.finish_reason, 'stop', `${name}: finish_reason ${choice.finish_reason}: ${content}`);
    let doc;
    assert.doesNotThrow(() => { doc = JSON.parse(content); }, `${name}: not JSON: ${content}`);
    const ok = validators[name](doc);
    assert.ok(ok, `${name}: ${content}\n${ajv.errorsText(validators[name].errors)}`);
    distinct.add(content);
  }
  // Random weights at temperature 1: the grammar constrains, it does not script.
  assert.ok(distinct.size > totalRequests / 2, `only ${distinct.size} distinct answers`);
});

test('JSON mode always returns an object (or a cut-off prefix when max_tokens ends it)', async () => {
  const responses = await pool(16, (i) =>
    client.chat.completions.create({
      model: modelName,
      messages: [{ role: 'user', content: `Any JSON object please (${i}).` }],
      temperature: 1.0,
      seed: 2000 + i,
      max_tokens: 400,
      response_format: { type: 'json_object' },
    }));
  let complete = 0;
  for (const r of responses) {
    const { content } = r.choices[0].message;
    if (r.choices[0].finish_reason === 'stop') {
      const doc = JSON.parse(content);
      assert.equal(typeof doc, 'object');
      assert.ok(doc !== null && !Array.isArray(doc), content);
      ++complete;
    } else {
      assert.equal(r.choices[0].finish_reason, 'length');
      assert.ok(content.startsWith('{'), content);
    }
  }
  assert.ok(complete > 0, 'no JSON-mode answer completed within max_tokens');
});

test('regex and choice extensions (vLLM structured_outputs, guided_*), streamed and not', async () => {
  const regex = '[A-Z][a-z]{2,6}-[0-9]{3}(\\.[0-9])?';
  const choices = ['positive', 'negative', 'neutral', 'it depends'];
  for (let i = 0; i < 8; ++i) {
    const r = await client.completions.create({
      model: modelName,
      prompt: `Code ${i}:`,
      temperature: 1.0,
      seed: 3000 + i,
      max_tokens: 64,
      structured_outputs: { regex },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.match(r.choices[0].text, new RegExp(`^(?:${regex})$`));

    const stream = await client.chat.completions.create({
      model: modelName,
      messages: [{ role: 'user', content: `Sentiment ${i}?` }],
      temperature: 1.0,
      seed: 4000 + i,
      max_tokens: 64,
      stream: true,
      guided_choice: choices,
    });
    let text = '';
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text += c.delta?.content ?? '';
        finish = c.finish_reason ?? finish;
      }
    }
    assert.equal(finish, 'stop');
    assert.ok(choices.includes(text), text);
  }
});

test('llama-server fields: grammar (GBNF) and json_schema', async () => {
  const grammar = 'root ::= "(" [0-9]{1,3} ("+" [0-9]{1,3})* ")"';
  const g = await client.completions.create({
    model: modelName, prompt: 'Sum:', temperature: 1.0, seed: 5, max_tokens: 64, grammar,
  });
  assert.match(g.choices[0].text, /^\([0-9]{1,3}(\+[0-9]{1,3})*\)$/);
  const schema = { type: 'array', items: { type: 'integer', minimum: 1, maximum: 3 }, minItems: 1, maxItems: 3 };
  const j = await client.completions.create({
    model: modelName, prompt: 'List:', temperature: 1.0, seed: 6, max_tokens: 64, json_schema: schema,
  });
  const doc = JSON.parse(j.choices[0].text);
  assert.ok(ajv.validate(schema, doc), j.choices[0].text);
});

test('bad constraints are 400s naming the field and the problem', async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', multipleOf: 3 } } } },
      'response_format.json_schema.schema', /multipleOf/],
    [{ response_format: { type: 'xml' } }, 'response_format.type', /json_schema/],
    [{ structured_outputs: { regex: 'ab(c' } }, 'structured_outputs.regex', /offset/],
    [{ grammar: 'root ::= value' }, 'grammar', /value/],
    [{ guided_choice: [] }, 'guided_choice', /non-empty/],
    [{ guided_regex: 'a', grammar: 'root ::= "a"' }, 'grammar', /both/],
  ];
  for (const [extra, param, message] of cases) {
    await assert.rejects(
      client.chat.completions.create({
        model: modelName, messages: [{ role: 'user', content: 'x' }], max_tokens: 4, ...extra,
      }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: ${e}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, param, JSON.stringify(extra));
        assert.match(e.message, message);
        return true;
      });
  }
});
