// A small MCP server built on the TypeScript SDK, with zod schemas that share named
// parts: an address used twice and a recursive category, which the SDK writes under
// $defs and refers to with $ref. Run as `node zod_server.mjs` (stdio). Part of the
// corpus the gateway is tested against (tests/mcp/test_mcp_corpus.py).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import * as z from "zod";

const Address = z
  .object({ street: z.string(), city: z.string(), postcode: z.string().regex(/^\d{5}$/) })
  .meta({ id: "Address" });

const Category = z
  .object({
    name: z.string(),
    get children() {
      return z.array(Category).optional();
    },
  })
  .meta({ id: "Category" });

const server = new McpServer({ name: "corpus-zod", version: "1.0.0" });

server.registerTool(
  "ship",
  {
    description: "Plan a shipment from one address to another.",
    inputSchema: { from: Address, to: Address, parcels: z.number().int().min(1).max(9) },
    outputSchema: { route: z.string(), parcels: z.number().int() },
  },
  async ({ from, to, parcels }) => {
    const out = { route: `${from.city} -> ${to.city}`, parcels };
    return { content: [{ type: "text", text: JSON.stringify(out) }], structuredContent: out };
  },
);

server.registerTool(
  "count_categories",
  {
    description: "Count the categories of a tree.",
    inputSchema: { root: Category },
  },
  async ({ root }) => {
    const count = (c) => 1 + (c.children ?? []).reduce((n, child) => n + count(child), 0);
    return { content: [{ type: "text", text: String(count(root)) }] };
  },
);

await server.connect(new StdioServerTransport());
