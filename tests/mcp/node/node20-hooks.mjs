// Module resolution hook (see node20.mjs): `fs` as the conformance CLI imports it.
const SHIM = new URL("./node20-fs.mjs", import.meta.url).href;

export async function resolve(specifier, context, next) {
  const parent = context.parentURL ?? "";
  if ((specifier === "fs" || specifier === "node:fs") && /\/conformance(-next)?\/dist\//.test(parent)) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
