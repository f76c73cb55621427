// The official TypeScript SDK client against a toolbound server over streamable HTTP.
//
//   node ts_client.mjs URL TOKEN PLAN_JSON
//
// PLAN_JSON is a list of {"label", "name", "arguments"}. The client lists the tools
// first, as every host does, so that it checks each structuredContent against the
// tool's outputSchema; then it calls each tool in turn. It prints one JSON object:
// {"tools": [names], "results": {label: {"result": …} | {"thrown": {code, message}}}}.
// The client declares no elicitation capability: a call that needs a person's
// confirmation comes back pending.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);

// Never outlive the test that started us.
setTimeout(() => {
  console.error("ts_client: timed out");
  process.exit(2);
}, 60_000).unref();

const client = new Client({ name: "toolbound-ts-client-test", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: token ? { Authorization: `Bearer ${token}` } : {} },
});
await client.connect(transport);
const listed = await client.listTools();
const out = {
  protocolVersion: transport.protocolVersion ?? null,
  tools: listed.tools.map((t) => t.name),
  results: {},
};
for (const step of plan) {
  try {
    out.results[step.label] = { result: await client.callTool({ name: step.name, arguments: step.arguments }) };
  } catch (err) {
    out.results[step.label] = { thrown: { code: err?.code ?? null, message: String(err?.message ?? err) } };
  }
}
await client.close();
process.stdout.write(JSON.stringify(out));
