// zodToJSONSchema converts a Zod 4 schema that has no toJSONSchema() method
// (Zod before 4.2) to JSON Schema by reading its definition (_zod.def), as
// the original's runtime did with its own z.toJSONSchema: bundles built by
// the original's build carry their own copy of Zod, and the engine needs
// the role's schema as JSON to send it to a model and to find casRef
// fields. Metadata from .describe() and .meta() (description, title,
// casRef, ...) is kept. Types JSON Schema cannot describe (functions,
// promises, symbols, ...) become {} (anything); transforms describe their
// input.

const isObject = (v) => v !== null && typeof v === "object";

// metaOf reads what .describe() and .meta() registered for s.
function metaOf(s) {
  let meta;
  try {
    meta = typeof s.meta === "function" ? s.meta() : undefined;
  } catch (_e) {
    meta = undefined;
  }
  const out = isObject(meta) ? Object.assign({}, meta) : {};
  delete out.id;
  if (out.description === undefined && typeof s.description === "string") out.description = s.description;
  return out;
}

// isOptional says whether a property may be missing from the parsed
// value (a default fills it in, so it is required there).
function isOptional(s) {
  const z = s._zod;
  if (!isObject(z)) return false;
  if ("optout" in z) return z.optout === "optional";
  return isObject(z.def) && z.def.type === "optional";
}

function convert(s, depth) {
  if (depth > 64) return {};
  if (!isObject(s) || !isObject(s._zod) || !isObject(s._zod.def)) return {};
  const def = s._zod.def;
  const bag = isObject(s._zod.bag) ? s._zod.bag : {};
  const inner = (x) => convert(x, depth + 1);
  let out;
  switch (def.type) {
    case "string":
      out = { type: "string" };
      if (typeof bag.minimum === "number") out.minLength = bag.minimum;
      if (typeof bag.maximum === "number") out.maxLength = bag.maximum;
      if (typeof bag.format === "string" && bag.format !== "regex") out.format = bag.format;
      break;
    case "number":
    case "int":
      out = { type: typeof bag.format === "string" && /int/.test(bag.format) ? "integer" : "number" };
      if (typeof bag.minimum === "number" && Number.isFinite(bag.minimum)) out.minimum = bag.minimum;
      if (typeof bag.maximum === "number" && Number.isFinite(bag.maximum)) out.maximum = bag.maximum;
      break;
    case "boolean":
      out = { type: "boolean" };
      break;
    case "null":
      out = { type: "null" };
      break;
    case "date":
      out = { type: "string", format: "date-time" };
      break;
    case "never":
      out = { not: {} };
      break;
    case "literal": {
      const values = Array.isArray(def.values) ? def.values : [def.value];
      const types = Array.from(new Set(values.map((v) => (v === null ? "null" : typeof v))));
      out = types.length === 1 && ["string", "number", "boolean", "null"].includes(types[0]) ? { type: types[0] } : {};
      if (values.length === 1) out.const = values[0];
      else out.enum = values.slice();
      break;
    }
    case "enum": {
      const values = Object.values(isObject(def.entries) ? def.entries : {});
      out = { type: values.every((v) => typeof v === "number") ? "number" : "string", enum: values };
      break;
    }
    case "object": {
      const shape = isObject(def.shape) ? def.shape : {};
      const properties = {};
      const required = [];
      for (const key of Object.keys(shape)) {
        properties[key] = inner(shape[key]);
        if (!isOptional(shape[key])) required.push(key);
      }
      out = { type: "object", properties };
      if (required.length > 0) out.required = required;
      const catchall = def.catchall;
      if (isObject(catchall) && isObject(catchall._zod) && catchall._zod.def.type !== "never") {
        out.additionalProperties = catchall._zod.def.type === "unknown" ? {} : inner(catchall);
      } else {
        out.additionalProperties = false;
      }
      break;
    }
    case "array":
      out = { type: "array", items: inner(def.element) };
      if (typeof bag.minimum === "number") out.minItems = bag.minimum;
      if (typeof bag.maximum === "number") out.maxItems = bag.maximum;
      break;
    case "tuple":
      out = { type: "array", prefixItems: (def.items || []).map(inner) };
      if (isObject(def.rest)) out.items = inner(def.rest);
      break;
    case "record":
      out = { type: "object", propertyNames: inner(def.keyType), additionalProperties: inner(def.valueType) };
      break;
    case "union":
      out = { anyOf: (def.options || []).map(inner) };
      break;
    case "intersection":
      out = { allOf: [inner(def.left), inner(def.right)] };
      break;
    case "nullable":
      out = { anyOf: [inner(def.innerType), { type: "null" }] };
      break;
    case "optional":
    case "nonoptional":
    case "readonly":
    case "catch":
      out = inner(def.innerType);
      break;
    case "default":
    case "prefault": {
      let value;
      try {
        value = typeof def.defaultValue === "function" ? def.defaultValue() : def.defaultValue;
      } catch (_e) {
        value = undefined;
      }
      out = Object.assign(value === undefined ? {} : { default: JSON.parse(JSON.stringify(value)) }, inner(def.innerType));
      break;
    }
    case "pipe": {
      const outSide = def.out;
      const transform = isObject(outSide) && isObject(outSide._zod) && outSide._zod.def.type === "transform";
      out = inner(transform ? def.in : outSide);
      break;
    }
    case "lazy":
      out = typeof def.getter === "function" ? inner(def.getter()) : {};
      break;
    default:
      out = {};
  }
  return Object.assign(metaOf(s), out, metaOf(s));
}

export function isZodSchema(schema) {
  return isObject(schema) && "_zod" in schema;
}

export function zodToJSONSchema(schema) {
  return convert(schema, 0);
}
