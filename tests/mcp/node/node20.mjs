// Node 20 lacks fs.globSync, which the conformance CLI imports by name (only its
// `tier-check` command calls it). On Node 20 this hook hands the CLI an `fs` that
// has the name; on Node 22 and later it does nothing.
import { register } from "node:module";

const major = Number(process.versions.node.split(".")[0]);
if (major < 22) {
  register("./node20-hooks.mjs", import.meta.url);
}
