// @uncaged/workflow-agent-hermes as this engine provides it to bundles:
// the original's createHermesAgent(config), run by the engine's hermes
// agent (hermes chat -q <prompt> --yolo --max-turns 90 --quiet).
import { isAbsolute } from "path";
import { err, hermesAdapter, ok } from "@uncaged/workflow-runtime";
import { deferredAdapter } from "internal:compat_agents";

export function validateHermesAgentConfig(config) {
  if (config.command !== undefined && config.command !== null && (typeof config.command !== "string" || !isAbsolute(config.command))) {
    return err("command must be an absolute path to the hermes CLI binary");
  }
  if (config.timeout !== null && config.timeout !== undefined && !(typeof config.timeout === "number" && config.timeout >= 0)) {
    return err("timeout must be null or a non-negative number (milliseconds)");
  }
  return ok(undefined);
}

// createHermesAgent({command, model, timeout}) returns an AdapterFn; the
// config is checked when a role runs, as in the original. Without a
// command (older bundles had none) the engine's default applies:
// $WORKFLOW_HERMES_COMMAND, else hermes on PATH.
export function createHermesAgent(config) {
  return deferredAdapter("createHermesAgent", config, validateHermesAgentConfig, () =>
    hermesAdapter({
      command: typeof config.command === "string" ? config.command : undefined,
      model: typeof config.model === "string" ? config.model : undefined,
      timeout: typeof config.timeout === "number" && config.timeout > 0 ? config.timeout : undefined,
    }),
  );
}
