// The v2 flow through a client generated from openapi.yaml (openapi-typescript + openapi-fetch),
// against the gateway at the URL given as the first argument. Every step checks its answer and
// reads it through the generated types: `tsc --strict` proves the document describes what the
// program sends and reads, and running it proves the gateway answers as the document says.
// tests/e2e/test_typescript_client.py generates the types, type-checks, compiles and runs this.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

const BINARY = "application/vnd.kafka.binary.v2+json";
const JSON_FORMAT = "application/vnd.kafka.json.v2+json";
const INSTANCE = "/consumers/{group}/instances/{instance}";

const baseUrl = process.argv[2];
if (!baseUrl) {
  throw new Error("usage: node build/flow.js <gateway URL>");
}
const api = createClient<paths>({ baseUrl });
// One client per records media type: a poll's answer is then typed as that format's records only.
const binary = createClient<paths, typeof BINARY>({ baseUrl });
const json = createClient<paths, typeof JSON_FORMAT>({ baseUrl });

function expect(condition: boolean, what: string): asserts condition {
  if (!condition) {
    throw new Error(`not as expected: ${what}`);
  }
}

/** The data of a successful answer; else an error saying what was asked and what came back. */
function ok<T>(what: string, result: { data?: T; error?: unknown; response: Response }): T {
  if (!result.response.ok || result.data === undefined) {
    throw new Error(`${what}: ${result.response.status} ${JSON.stringify(result.error ?? null)}`);
  }
  return result.data;
}

/** A 204 answer. */
function done(what: string, result: { error?: unknown; response: Response }): void {
  if (result.response.status !== 204) {
    throw new Error(`${what}: ${result.response.status} ${JSON.stringify(result.error ?? null)}`);
  }
}

function text(base64: string | null): string | null {
  return base64 === null ? null : Buffer.from(base64, "base64").toString("utf-8");
}

async function main(): Promise<void> {
  // {} to an API client; the document also names the page a browser gets (text/html)
  const root = ok("GET /", await api.GET("/"));
  expect(typeof root === "object" && Object.keys(root).length === 0, "GET / answers {}");

  const clusters = ok("list clusters", await api.GET("/v3/clusters"));
  const cluster = clusters.data[0]?.cluster_id;
  expect(cluster !== undefined, "a cluster is listed");
  const topic = "ts-orders";
  // No replication_factor, no configs: what the call needs only.
  const created = ok(
    "create topic",
    await api.POST("/v3/clusters/{cluster_id}/topics", {
      params: { path: { cluster_id: cluster } },
      body: { topic_name: topic, partitions_count: 2 },
    }),
  );
  expect(created.partitions_count === 2, "the topic has 2 partitions");

  const brokers = ok("list brokers", await api.GET("/brokers"));
  expect(brokers.brokers.length > 0, "a broker is listed");
  const topics = ok("list topics", await api.GET("/topics"));
  expect(topics.includes(topic), "the topic is listed");

  const toTopic = { params: { path: { topic } } };
  const binaryProduced = ok(
    "produce binary",
    await api.POST("/topics/{topic}", {
      ...toTopic,
      headers: { "Content-Type": BINARY },
      body: {
        records: [
          { key: Buffer.from("k0").toString("base64"), value: Buffer.from("raw").toString("base64"), partition: 0 },
        ],
      },
    }),
  );
  expect(binaryProduced.offsets[0]?.partition === 0, "the binary record is on partition 0");
  const jsonProduced = ok(
    "produce json",
    await api.POST("/topics/{topic}", {
      ...toTopic,
      headers: { "Content-Type": JSON_FORMAT },
      body: { records: [{ key: "k1", value: { n: 1 }, partition: 1 }] },
    }),
  );
  expect(jsonProduced.offsets[0]?.error_code === null, "the json record is stored");

  // A binary consumer with only the configs it wants.
  const group = "ts-group";
  const consumer = ok(
    "create consumer",
    await api.POST("/consumers/{group}", {
      params: { path: { group } },
      body: { name: "ts-1", format: "binary", "auto.offset.reset": "earliest" },
    }),
  );
  expect(consumer.instance_id === "ts-1", "the instance has its name");
  const instance = { params: { path: { group, instance: consumer.instance_id } } };
  done("subscribe", await api.POST(`${INSTANCE}/subscription`, { ...instance, body: { topics: [topic] } }));

  const pollBinary = async (): Promise<components["schemas"]["BinaryConsumerRecord"][]> => {
    const records: components["schemas"]["BinaryConsumerRecord"][] = [];
    for (let attempt = 0; attempt < 20 && records.length < 2; attempt++) {
      const polled = await binary.GET(`${INSTANCE}/records`, {
        params: { ...instance.params, query: { timeout: 500 } },
        headers: { Accept: BINARY },
      });
      records.push(...ok("poll binary", polled));
    }
    return records;
  };
  const records = await pollBinary();
  // A binary record's key and value are strings (base64) or null: typed so, no narrowing.
  const values = records.map((record) => {
    const key: string | null = record.key;
    const value: string | null = record.value;
    return `${record.partition}:${text(key)}=${text(value)}`;
  });
  expect(values.sort().join(" ") === '0:k0=raw 1:"k1"={"n":1}', `binary records read back: ${values}`);

  const committed = ok("commit", await api.POST(`${INSTANCE}/offsets`, instance));
  expect(committed.length === 2, "two partitions committed");
  const offsets = ok(
    "committed offsets",
    await api.GET(`${INSTANCE}/offsets`, {
      params: { ...instance.params, query: { partitions: [`${topic}:0`, `${topic}:1`] } },
    }),
  );
  const positions = offsets.offsets.map((o) => `${o.partition}@${o.offset}`).sort();
  expect(positions.join(" ") === "0@1 1@1", `committed offsets: ${positions}`);

  const both = { partitions: [0, 1].map((partition) => ({ topic, partition })) };
  done("seek to beginning", await api.POST(`${INSTANCE}/positions/beginning`, { ...instance, body: both }));
  expect((await pollBinary()).length === 2, "the records again after a seek to the beginning");
  done("seek to end", await api.POST(`${INSTANCE}/positions/end`, { ...instance, body: both }));
  const atEnd = ok(
    "poll at the end",
    await binary.GET(`${INSTANCE}/records`, { params: { ...instance.params, query: { timeout: 200 } } }),
  );
  expect(atEnd.length === 0, "nothing after a seek to the end");
  done(
    "seek to an offset",
    await api.POST(`${INSTANCE}/positions`, { ...instance, body: { offsets: [{ topic, partition: 1, offset: 0 }] } }),
  );
  const again = ok(
    "poll after a seek",
    await binary.GET(`${INSTANCE}/records`, { params: { ...instance.params, query: { timeout: 2000 } } }),
  );
  expect(again.length === 1 && again[0]?.partition === 1, "partition 1's record after a seek to its offset 0");
  done("delete consumer", await api.DELETE(INSTANCE, instance));

  // A json consumer: its records' keys and values are the JSON they were produced as.
  const jsonConsumer = ok(
    "create json consumer",
    await api.POST("/consumers/{group}", {
      params: { path: { group: "ts-json" } },
      body: { format: "json", "auto.offset.reset": "earliest" },
    }),
  );
  const jsonInstance = { params: { path: { group: "ts-json", instance: jsonConsumer.instance_id } } };
  done(
    "assign",
    await api.POST(`${INSTANCE}/assignments`, { ...jsonInstance, body: { partitions: [{ topic, partition: 1 }] } }),
  );
  let jsonRecords: components["schemas"]["JsonConsumerRecord"][] = [];
  for (let attempt = 0; attempt < 20 && jsonRecords.length === 0; attempt++) {
    jsonRecords = ok(
      "poll json",
      await json.GET(`${INSTANCE}/records`, {
        params: { ...jsonInstance.params, query: { timeout: 500 } },
        headers: { Accept: JSON_FORMAT },
      }),
    );
  }
  const first = jsonRecords[0];
  expect(first !== undefined, "the json record is polled");
  const value: unknown = first.value;
  expect(first.key === "k1" && JSON.stringify(value) === '{"n":1}', `json record: ${JSON.stringify(first)}`);
  done("delete json consumer", await api.DELETE(INSTANCE, jsonInstance));

  // The schema registry: register a schema, fetch it by its id.
  const registryRoot: Record<string, never> = ok("registry root", await api.GET("/schema-registry"));
  expect(Object.keys(registryRoot).length === 0, "the registry's root answers {}");
  const schema = JSON.stringify({
    type: "record",
    name: "Order",
    fields: [{ name: "id", type: "long" }],
  });
  const registered = ok(
    "register schema",
    await api.POST("/schema-registry/subjects/{subject}/versions", {
      params: { path: { subject: `${topic}-value` } },
      body: { schema },
    }),
  );
  const fetched = ok(
    "fetch schema",
    await api.GET("/schema-registry/schemas/ids/{id}", { params: { path: { id: registered.id } } }),
  );
  expect(JSON.parse(fetched.schema).name === "Order", `schema fetched by id: ${fetched.schema}`);
  console.log("the v2 flow ran");
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
