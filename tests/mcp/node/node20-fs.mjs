// `node:fs` plus a `globSync` that says why it is missing (Node 20; see node20.mjs).
import fs from "node:fs";

export * from "node:fs";
export default fs;
export function globSync() {
  throw new Error("fs.globSync needs Node 22 or later");
}
