// Parse an AsyncAPI document with the AsyncAPI project's parser (Avro and Protobuf payloads by
// their schema parsers) and print what it found, as JSON: its diagnostics (errors and warnings)
// and, of a valid document, each channel's address and message payload's type, and each
// operation's action. Then generate TypeScript models of its messages with Modelina.
//   node validate.mjs DOCUMENT.json
import { readFileSync } from "node:fs";
import { Parser, DiagnosticSeverity } from "@asyncapi/parser";
import { AvroSchemaParser } from "@asyncapi/avro-schema-parser";
import { ProtoBuffSchemaParser } from "@asyncapi/protobuf-schema-parser";
import { TypeScriptGenerator } from "@asyncapi/modelina";

const parser = new Parser();
parser.registerSchemaParser(AvroSchemaParser());
parser.registerSchemaParser(ProtoBuffSchemaParser());
const text = readFileSync(process.argv[2], "utf8");
const { document, diagnostics } = await parser.parse(text);
const out = {
  errors: diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error).map((d) => `${d.path.join("/")}: ${d.message}`),
  warnings: diagnostics.filter((d) => d.severity === DiagnosticSeverity.Warning).map((d) => `${d.path.join("/")}: ${d.message}`),
  channels: {},
  operations: {},
  models: {},
};
if (document) {
  for (const channel of document.channels()) {
    const payloads = channel.messages().all().map((m) => m.payload()?.type() ?? null);
    out.channels[channel.id()] = { address: channel.address(), payloads, bindings: channel.bindings().all().map((b) => b.protocol()) };
  }
  for (const op of document.operations()) {
    out.operations[op.id()] = op.action();
  }
  const models = await new TypeScriptGenerator({ modelType: "interface" }).generate(document);
  for (const model of models) {
    out.models[model.modelName] = model.result;
  }
}
console.log(JSON.stringify(out));
