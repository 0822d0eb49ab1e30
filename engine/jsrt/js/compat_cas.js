// @uncaged/workflow-cas as this engine provides it to bundles: the node
// helpers agent code calls with runtime.cas, built on this engine's node
// encoding so hashes match what the engine itself stores.
const compat = require("internal:compat");

// putContentNodeWithRefs(cas, payload, refs) stores a content node through
// any CasStore and resolves with its hash.
export async function putContentNodeWithRefs(cas, payload, refs) {
  if (typeof payload !== "string") {
    throw new TypeError("putContentNodeWithRefs: payload must be a string");
  }
  return cas.put(compat.contentNodeYAML(payload, refs === undefined ? [] : refs));
}

// parseCasThreadNode(yaml) reads a stored thread node: {kind, node}, or
// null when the text is none.
export function parseCasThreadNode(yamlText) {
  return compat.parseNode(String(yamlText));
}

// isCasNodeYaml(text) says whether text is a stored thread node.
export function isCasNodeYaml(text) {
  return typeof text === "string" && compat.parseNode(text) !== null;
}

// getContentMerklePayload(cas, hash) resolves with a content node's text,
// or null when the hash holds no content node.
export async function getContentMerklePayload(cas, hash) {
  const text = await cas.get(hash);
  if (typeof text !== "string") return null;
  const parsed = compat.parseNode(text);
  return parsed !== null && parsed.kind === "content" ? parsed.node.payload : null;
}
