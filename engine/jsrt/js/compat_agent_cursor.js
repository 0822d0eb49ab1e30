// @uncaged/workflow-agent-cursor as this engine provides it to bundles:
// the original's createCursorAgent(config), run by the engine's cursor
// agent (same argv, workspace extraction and timeout).
import { isAbsolute } from "path";
import { cursorAdapter, err, ok } from "@uncaged/workflow-runtime";
import { deferredAdapter } from "internal:compat_agents";

export function validateCursorAgentConfig(config) {
  if (config.command !== undefined && config.command !== null && (typeof config.command !== "string" || !isAbsolute(config.command))) {
    return err("command must be an absolute path to the cursor-agent CLI binary");
  }
  if (config.timeout !== undefined && config.timeout !== null && !(typeof config.timeout === "number" && config.timeout >= 0)) {
    return err("timeout must be a non-negative number (milliseconds); use 0 for no limit");
  }
  if (config.workspace !== null && config.workspace !== undefined && (typeof config.workspace !== "string" || !isAbsolute(config.workspace))) {
    return err("workspace must be an absolute filesystem path when set");
  }
  return ok(undefined);
}

// createCursorAgent({command, model, timeout, workspace}) returns an
// AdapterFn. As in the original the config is checked when a role runs;
// model null is "auto", timeout 0 is no limit, and workspace null has the
// extract model read the workspace from the thread. Without a command
// (older bundles had none) the engine's default applies:
// $WORKFLOW_CURSOR_COMMAND, else cursor-agent on PATH.
export function createCursorAgent(config) {
  return deferredAdapter("createCursorAgent", config, validateCursorAgentConfig, () =>
    cursorAdapter({
      command: typeof config.command === "string" ? config.command : undefined,
      model: typeof config.model === "string" ? config.model : "auto",
      timeout: typeof config.timeout === "number" && config.timeout > 0 ? config.timeout : undefined,
      workspace: typeof config.workspace === "string" ? config.workspace : undefined,
    }),
  );
}
