// Routing of the __NAME__ template: for START and each role, the ordered
// transitions; the first FALLBACK or named condition whose check passes wins.
import { END, FALLBACK, START } from "@uncaged/workflow-runtime";
import type { ModeratorTable } from "@uncaged/workflow-runtime";

export const __IDENT__TemplateTable: ModeratorTable = {
  [START]: [{ condition: FALLBACK, role: "__NAME__" }],
  "__NAME__": [{ condition: FALLBACK, role: END }],
};
