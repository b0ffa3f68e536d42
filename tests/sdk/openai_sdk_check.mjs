// The official OpenAI Node SDK (the `openai` npm package, pinned in
// package.json) against `loragate serve` (issue 24): structured output and
// tool calls made exactly as an OpenAI user makes them. The demo's weights
// are random, so outputs are gibberish, but they must obey their constraints:
// whenever a reply ends with "stop" (or "tool_calls") its JSON parses and
// follows the schema, and every step needs at least one such reply, so that
// it cannot pass without checking anything.
//
// Run by tests/sdk/run_sdk_check.sh with OPENAI_BASE_URL=<server>/v1.
// SDK_CHECK_TOOLS=0 leaves out the tool-call steps. Prints one line per
// step, passed or failed (and why); exits 1 when any failed.
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { LengthFinishReasonError } from 'openai/error';

const MODEL = process.env.SDK_CHECK_MODEL ?? 'support-bot';
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
const client = new OpenAI({
  apiKey: process.env.OPENAI_API_KEY || 'sk-loragate-unused',
  maxRetries: 0,
  timeout: 60_000,
});

// ---- the reply schema of the structured-output steps, and its check by hand

const REPLY_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 16 },
    count: { type: 'integer', minimum: 1, maximum: 10 },
    mood: { enum: ['happy', 'sad', 'neutral'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
  },
  required: ['name', 'count', 'mood', 'tags'],
  additionalProperties: false,
};
const REPLY_FORMAT = {
  type: 'json_schema',
  json_schema: { name: 'reply', strict: true, schema: REPLY_SCHEMA },
};

const codePoints = (s) => [...s].length;
const isPlainObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkReply(v, text) {
  const where = `reply ${text}`;
  assert.ok(isPlainObject(v), `${where}: not an object`);
  assert.deepEqual(Object.keys(v).sort(), ['count', 'mood', 'name', 'tags'], `${where}: wrong keys`);
  assert.equal(typeof v.name, 'string', `${where}: name`);
  assert.ok(codePoints(v.name) <= 16, `${where}: name longer than 16`);
  assert.ok(Number.isInteger(v.count) && v.count >= 1 && v.count <= 10, `${where}: count`);
  assert.ok(['happy', 'sad', 'neutral'].includes(v.mood), `${where}: mood`);
  assert.ok(Array.isArray(v.tags) && v.tags.length <= 3, `${where}: tags`);
  for (const t of v.tags) assert.ok(typeof t === 'string' && codePoints(t) <= 8, `${where}: tag ${t}`);
}

// ---- the tools of the tool-call steps, and their arguments' check by hand

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      parameters: {
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'integer' } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  },
];

function checkArguments(name, args) {
  const where = `${name}(${args})`;
  assert.equal(typeof args, 'string', `${where}: arguments must be a JSON string`);
  const v = JSON.parse(args);
  assert.ok(isPlainObject(v), `${where}: not an object`);
  if (name === 'get_weather') {
    assert.deepEqual(Object.keys(v).sort(), ['city', 'unit'], `${where}: wrong keys`);
    assert.ok(typeof v.city === 'string' && codePoints(v.city) <= 20, `${where}: city`);
    assert.ok(v.unit === 'c' || v.unit === 'f', `${where}: unit`);
  } else if (name === 'add') {
    assert.deepEqual(Object.keys(v).sort(), ['a', 'b'], `${where}: wrong keys`);
    assert.ok(Number.isInteger(v.a) && Number.isInteger(v.b), `${where}: a and b must be integers`);
  } else {
    assert.fail(`a call of ${name}, which is not among the tools`);
  }
  return v;
}

function checkToolCall(call, allowed) {
  assert.equal(call.type, 'function', `tool call type ${call.type}`);
  assert.ok(typeof call.id === 'string' && call.id.startsWith('call_') && call.id.length > 5, `tool call id ${call.id}`);
  assert.ok(allowed.includes(call.function?.name), `tool call names ${call.function?.name}, not one of ${allowed}`);
  return checkArguments(call.function.name, call.function.arguments);
}

// ---- helpers

const messages = (content) => [{ role: 'user', content }];

// Runs `attempt(seed)` for each seed; it returns true when its reply was
// complete (and checked). At least one must be.
async function overSeeds(what, attempt) {
  let complete = 0;
  for (const seed of SEEDS) if (await attempt(seed)) complete += 1;
  assert.ok(complete >= 1, `${what}: no reply of ${SEEDS.length} ended complete, so none was checked`);
  return `${complete}/${SEEDS.length} complete`;
}

// ---- the steps

const steps = [];
const step = (name, fn) => steps.push({ name, fn });

step('chat.completions.create with response_format json_schema', () =>
  overSeeds('json_schema', async (seed) => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: messages('Describe a pet.'), max_tokens: 200, seed, response_format: REPLY_FORMAT,
    });
    const choice = r.choices[0];
    assert.ok(['stop', 'length'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
    if (choice.finish_reason !== 'stop') return false;
    checkReply(JSON.parse(choice.message.content), choice.message.content);
    return true;
  }));

step('beta.chat.completions.parse with a json_schema response_format', () =>
  overSeeds('parse', async (seed) => {
    let r;
    try {
      r = await client.beta.chat.completions.parse({
        model: MODEL, messages: messages('Describe a pet.'), max_tokens: 200, seed, response_format: REPLY_FORMAT,
      });
    } catch (e) {
      if (e instanceof LengthFinishReasonError) return false;  // the SDK's own way to say "length"
      throw e;
    }
    const { message, finish_reason } = r.choices[0];
    assert.equal(finish_reason, 'stop');
    assert.ok(isPlainObject(message.parsed), `message.parsed is ${JSON.stringify(message.parsed)}`);
    assert.deepEqual(message.parsed, JSON.parse(message.content));
    checkReply(message.parsed, message.content);
    return true;
  }));

step('chat.completions.create with response_format json_object', () =>
  overSeeds('json_object', async (seed) => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: messages('Some JSON, please.'), max_tokens: 200, seed,
      response_format: { type: 'json_object' },
    });
    const choice = r.choices[0];
    assert.ok(['stop', 'length'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
    if (choice.finish_reason !== 'stop') return false;
    assert.ok(isPlainObject(JSON.parse(choice.message.content)), `not an object: ${choice.message.content}`);
    return true;
  }));

step('streamed chat.completions.create with response_format json_schema', () =>
  overSeeds('stream', async (seed) => {
    const stream = await client.chat.completions.create({
      model: MODEL, messages: messages('Describe a pet.'), max_tokens: 200, seed, response_format: REPLY_FORMAT,
      stream: true,
    });
    let content = '';
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        content += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(['stop', 'length'].includes(finish), `final finish_reason ${finish}`);
    if (finish !== 'stop') return false;
    checkReply(JSON.parse(content), content);
    return true;
  }));

step('completions.create (legacy) with guided_json in the body', () =>
  overSeeds('guided_json', async (seed) => {
    const r = await client.completions.create({
      model: MODEL, prompt: 'Once upon a time', max_tokens: 200, seed, guided_json: REPLY_SCHEMA,
    });
    const choice = r.choices[0];
    assert.ok(['stop', 'length'].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
    if (choice.finish_reason !== 'stop') return false;
    checkReply(JSON.parse(choice.text), choice.text);
    return true;
  }));

if (process.env.SDK_CHECK_TOOLS !== '0') {
  const WEATHER = { type: 'function', function: { name: 'get_weather' } };

  step('tools: tool_choice naming get_weather', () =>
    overSeeds('named tool', async (seed) => {
      const r = await client.chat.completions.create({
        model: MODEL, messages: messages('Weather in Paris?'), max_tokens: 200, seed, tools: TOOLS,
        tool_choice: WEATHER,
      });
      const { message, finish_reason } = r.choices[0];
      assert.ok(['tool_calls', 'length'].includes(finish_reason), `finish_reason ${finish_reason}`);
      if (finish_reason !== 'tool_calls') return false;
      assert.equal(message.content, null, 'message.content of a tool call');
      assert.equal(message.tool_calls?.length, 1, `tool_calls ${JSON.stringify(message.tool_calls)}`);
      checkToolCall(message.tool_calls[0], ['get_weather']);
      return true;
    }));

  step('tools: tool_choice "required"', () =>
    overSeeds('required', async (seed) => {
      const r = await client.chat.completions.create({
        model: MODEL, messages: messages('Use a tool.'), max_tokens: 250, seed, tools: TOOLS, tool_choice: 'required',
      });
      const { message, finish_reason } = r.choices[0];
      assert.ok(['tool_calls', 'length'].includes(finish_reason), `finish_reason ${finish_reason}`);
      if (finish_reason !== 'tool_calls') return false;
      assert.ok(message.tool_calls?.length >= 1, `tool_calls ${JSON.stringify(message.tool_calls)}`);
      const ids = new Set();
      for (const call of message.tool_calls) {
        checkToolCall(call, ['get_weather', 'add']);
        ids.add(call.id);
      }
      assert.equal(ids.size, message.tool_calls.length, 'tool call ids must differ');
      return true;
    }));

  step('tools: tool_choice "required" with parallel_tool_calls false', () =>
    overSeeds('required, one call', async (seed) => {
      const r = await client.chat.completions.create({
        model: MODEL, messages: messages('Use a tool.'), max_tokens: 200, seed, tools: TOOLS, tool_choice: 'required',
        parallel_tool_calls: false,
      });
      const { message, finish_reason } = r.choices[0];
      assert.ok(['tool_calls', 'length'].includes(finish_reason), `finish_reason ${finish_reason}`);
      if (finish_reason !== 'tool_calls') return false;
      assert.equal(message.tool_calls?.length, 1, `tool_calls ${JSON.stringify(message.tool_calls)}`);
      checkToolCall(message.tool_calls[0], ['get_weather', 'add']);
      return true;
    }));

  step('tools: streamed tool call, deltas accumulated by index', () =>
    overSeeds('streamed tool call', async (seed) => {
      const stream = await client.chat.completions.create({
        model: MODEL, messages: messages('Weather in Oslo?'), max_tokens: 200, seed, tools: TOOLS,
        tool_choice: WEATHER, stream: true,
      });
      const calls = [];
      let finish = null;
      let content = '';
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          if (c.finish_reason) finish = c.finish_reason;
          content += c.delta?.content ?? '';
          for (const d of c.delta?.tool_calls ?? []) {
            assert.ok(Number.isInteger(d.index), `tool call delta without an index: ${JSON.stringify(d)}`);
            if (!calls[d.index]) {
              // The first delta of a call names it.
              assert.ok(d.id && d.type === 'function' && d.function?.name, `first delta ${JSON.stringify(d)}`);
              calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
            }
            calls[d.index].function.arguments += d.function?.arguments ?? '';
          }
        }
      }
      assert.ok(['tool_calls', 'length'].includes(finish), `final finish_reason ${finish}`);
      if (finish !== 'tool_calls') return false;
      assert.equal(content, '', 'a named tool call streams no content');
      assert.equal(calls.length, 1, `calls ${JSON.stringify(calls)}`);
      checkToolCall(calls[0], ['get_weather']);
      return true;
    }));

  step('tools: beta.chat.completions.stream helper and finalChatCompletion()', () =>
    overSeeds('stream helper', async (seed) => {
      // strict tools: the SDK then parses the arguments itself (parsed_arguments).
      const strictTools = TOOLS.map((t) => ({ ...t, function: { ...t.function, strict: true } }));
      const runner = client.beta.chat.completions.stream({
        model: MODEL, messages: messages('Weather in Rome?'), max_tokens: 200, seed, tools: strictTools,
        tool_choice: WEATHER,
      });
      const done = [];
      runner.on('tool_calls.function.arguments.done', (e) => done.push(e));
      let final;
      try {
        final = await runner.finalChatCompletion();
      } catch (e) {
        if (e instanceof LengthFinishReasonError) return false;
        throw e;
      }
      const { message, finish_reason } = final.choices[0];
      assert.equal(finish_reason, 'tool_calls');
      assert.equal(message.tool_calls?.length, 1, `tool_calls ${JSON.stringify(message.tool_calls)}`);
      const call = message.tool_calls[0];
      const args = checkToolCall(call, ['get_weather']);
      assert.deepEqual(call.function.parsed_arguments, args, 'the SDK parsed other arguments');
      assert.equal(done.length, 1, `arguments.done events ${JSON.stringify(done)}`);
      assert.equal(done[0].name, 'get_weather');
      return true;
    }));

  step('tools: tool_choice "none" gives plain content', () =>
    overSeeds('none', async (seed) => {
      const r = await client.chat.completions.create({
        model: MODEL, messages: messages('Weather in Paris?'), max_tokens: 32, seed, tools: TOOLS, tool_choice: 'none',
      });
      const { message, finish_reason } = r.choices[0];
      assert.ok(['stop', 'length'].includes(finish_reason), `finish_reason ${finish_reason}`);
      assert.ok(!message.tool_calls || message.tool_calls.length === 0, `tool_calls ${JSON.stringify(message.tool_calls)}`);
      assert.equal(typeof message.content, 'string');
      return true;
    }));

  step('tools: tool_choice naming a function not in tools is a 400', async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: MODEL, messages: messages('Hi'), max_tokens: 8, tools: TOOLS,
        tool_choice: { type: 'function', function: { name: 'no_such_tool' } },
      }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, 'tool_choice', `error param ${e.param}`);
        assert.ok(e.message.includes('no_such_tool'), `the error should name the function: ${e.message}`);
        return true;
      });
    return 'BadRequestError';
  });
}

// Every step runs, so that one failure does not hide the state of the others.
let passed = 0;
const failed = [];
for (const { name, fn } of steps) {
  try {
    const note = await fn();
    passed += 1;
    console.log(`ok - ${name}${note ? ` (${note})` : ''}`);
  } catch (e) {
    failed.push(name);
    console.log(`FAILED - ${name}: ${e?.stack ?? e}`);
  }
}
if (failed.length > 0) {
  console.log(`openai_sdk: ${failed.length} of ${steps.length} checks failed: ${failed.join('; ')}`);
  process.exit(1);
}
console.log(`openai_sdk: all ${passed} checks passed`);
