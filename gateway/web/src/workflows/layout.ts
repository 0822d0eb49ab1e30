// The role graph's layout: dagre positions for @xyflow/react nodes, top to
// bottom, with __start__ / __end__ as terminals, FALLBACK edges dashed and
// the edges a thread went along bold and green.
//
// Edges are routed here, not by React Flow: a back-edge (one that closes a
// loop, reviewer → writer) would otherwise be drawn on top of the forward
// edge it pairs with, and the loop would vanish. Forward edges follow
// dagre's points; back-edges leave their role on its right, run up a lane
// of their own right of everything they pass, and come back in on the
// right of the role they return to; a self-loop is a loop on its role's
// left. Every edge carries its SVG path and label position in its data.
import dagre from "@dagrejs/dagre";
import type { Edge as FlowEdge, Node as FlowNode } from "@xyflow/react";
import { MarkerType } from "@xyflow/react";
import type { Edge } from "../api";
import { END, FALLBACK, START, takenCounts } from "./path";

export { END, FALLBACK, START } from "./path";
/** ROLE_SIZE is a role's box; the layout routes edges to its border. */
export const ROLE_SIZE = { width: 170, height: 44 };
/** TERMINAL_SIZE is the box of __start__ and __end__. */
export const TERMINAL_SIZE = { width: 90, height: 34 };
/** EDGE_TYPE is the React Flow edge type Graph registers for routed edges. */
export const EDGE_TYPE = "routed";

// Room between a back-edge lane and what it passes, and between lanes.
const LANE_GAP = 24;
// How far a self-loop reaches out left of its role.
const LOOP_REACH = 46;
const LABEL_HEIGHT = 18;

/** Point is a position in the graph's coordinates (pixels, y down). */
export type Point = { x: number; y: number };
/** EdgeKind is how an edge is routed: along dagre's layout, as a loop's back-edge, or as a self-loop. */
export type EdgeKind = "forward" | "back" | "self";
/** GraphNodeData is what a node shows; active is the role in flight, waiting when it runs only once resumed. */
export type GraphNodeData = { label: string; kind: "role" | "terminal"; description?: string; active?: boolean; waiting?: boolean };
/** GraphEdgeData is what the routed edge component draws. */
export type GraphEdgeData = {
  condition: string;
  description: string | null;
  kind: EdgeKind;
  /** the points the path goes through (corners of a back-edge, dagre's points of a forward one) */
  points: Point[];
  /** the SVG path */
  path: string;
  labelX: number;
  labelY: number;
  visited: boolean;
  /** how many times the thread took the edge */
  times: number;
};

/** LayoutOptions say what a thread did: edges taken (indices, repeats count), the role in flight. */
export type LayoutOptions = { taken?: number[]; active?: string | null; waiting?: boolean };

/** labelWidth estimates a label's width in pixels (13px sans-serif). */
export const labelWidth = (text: string) => Math.max(24, Math.round(text.length * 7.2) + 14);

/**
 * edgeKinds sorts the edges into forward ones, back-edges (each closes a
 * loop: it leads to a role on the way to it in a depth-first walk from
 * __start__, in the edges' order) and self-loops.
 */
export function edgeKinds(edges: Edge[], names: Iterable<string>): EdgeKind[] {
  const kinds: EdgeKind[] = edges.map((e) => (e.from === e.to ? "self" : "forward"));
  const out = new Map<string, number[]>();
  edges.forEach((e, i) => {
    if (kinds[i] === "self") return;
    const list = out.get(e.from) ?? [];
    list.push(i);
    out.set(e.from, list);
  });
  const state = new Map<string, "open" | "done">();
  const visit = (n: string) => {
    state.set(n, "open");
    for (const i of out.get(n) ?? []) {
      const to = edges[i].to;
      const s = state.get(to);
      if (s === "open") kinds[i] = "back";
      else if (s === undefined) visit(to);
    }
    state.set(n, "done");
  };
  visit(START);
  for (const n of names) if (!state.has(n)) visit(n);
  return kinds;
}

/** smoothPath draws a B-spline through points (dagre's), starting and ending on the first and last. */
export function smoothPath(p: Point[]): string {
  const f = (n: number) => Math.round(n * 10) / 10;
  if (p.length === 0) return "";
  if (p.length < 3) return `M${f(p[0].x)},${f(p[0].y)}` + (p[1] ? ` L${f(p[1].x)},${f(p[1].y)}` : "");
  let d = `M${f(p[0].x)},${f(p[0].y)} L${f((5 * p[0].x + p[1].x) / 6)},${f((5 * p[0].y + p[1].y) / 6)}`;
  const seg = (a: Point, b: Point, c: Point) => {
    d += ` C${f((2 * a.x + b.x) / 3)},${f((2 * a.y + b.y) / 3)} ${f((a.x + 2 * b.x) / 3)},${f((a.y + 2 * b.y) / 3)} ${f((a.x + 4 * b.x + c.x) / 6)},${f((a.y + 4 * b.y + c.y) / 6)}`;
  };
  for (let i = 2; i < p.length; i++) seg(p[i - 2], p[i - 1], p[i]);
  const [a, b] = [p[p.length - 2], p[p.length - 1]];
  seg(a, b, b);
  return d + ` L${f(b.x)},${f(b.y)}`;
}

/** intersect is where the line from a box's center to p leaves the box. */
function intersect(c: Point, box: { width: number; height: number }, p: Point): Point {
  const dx = p.x - c.x;
  const dy = p.y - c.y;
  if (!dx && !dy) return c;
  let w = box.width / 2;
  let h = box.height / 2;
  if (Math.abs(dy) * w > Math.abs(dx) * h) {
    if (dy < 0) h = -h;
    return { x: c.x + (h * dx) / dy, y: c.y + h };
  }
  if (dx < 0) w = -w;
  return { x: c.x + w, y: c.y + (w * dy) / dx };
}

/** orthoPath draws a polyline with rounded corners. */
function orthoPath(p: Point[], r = 10): string {
  const f = (n: number) => Math.round(n * 10) / 10;
  let d = `M${f(p[0].x)},${f(p[0].y)}`;
  for (let i = 1; i < p.length - 1; i++) {
    const [a, b, c] = [p[i - 1], p[i], p[i + 1]];
    const r1 = Math.min(r, Math.hypot(b.x - a.x, b.y - a.y) / 2, Math.hypot(c.x - b.x, c.y - b.y) / 2);
    const toward = (from: Point, to: Point, len: number) => {
      const l = Math.hypot(to.x - from.x, to.y - from.y) || 1;
      return { x: from.x + ((to.x - from.x) * len) / l, y: from.y + ((to.y - from.y) * len) / l };
    };
    const s = toward(b, a, r1);
    const e = toward(b, c, r1);
    d += ` L${f(s.x)},${f(s.y)} Q${f(b.x)},${f(b.y)} ${f(e.x)},${f(e.y)}`;
  }
  const last = p[p.length - 1];
  return d + ` L${f(last.x)},${f(last.y)}`;
}

/**
 * layoutGraph places the roles and terminals top to bottom and routes every
 * edge (see the top of this file), marking what opts say the thread did.
 */
export function layoutGraph(
  edges: Edge[],
  roles: Record<string, { description?: string }> = {},
  opts: LayoutOptions = {},
): { nodes: FlowNode<GraphNodeData>[]; edges: FlowEdge<GraphEdgeData>[] } {
  const { active = null, waiting = false } = opts;
  const names = new Set<string>(Object.keys(roles));
  for (const e of edges) {
    names.add(e.from);
    names.add(e.to);
  }
  // Terminals are always drawn, even for a graph without edges.
  names.add(START);
  names.add(END);
  const size = (n: string) => (n === START || n === END ? TERMINAL_SIZE : ROLE_SIZE);
  const kinds = edgeKinds(edges, names);
  const label = (e: Edge) => (e.condition === FALLBACK ? "" : e.condition);

  // Self-loops sit left of their role: dagre keeps that room free by
  // seeing the role wider on both sides.
  const loops = new Map<string, number[]>();
  edges.forEach((e, i) => {
    if (kinds[i] !== "self") return;
    loops.set(e.from, [...(loops.get(e.from) ?? []), i]);
  });
  const loopRoom = (n: string) => {
    const l = loops.get(n);
    if (!l) return 0;
    return LOOP_REACH + 14 * (l.length - 1) + Math.max(...l.map((i) => (label(edges[i]) ? labelWidth(label(edges[i])) : 0))) + 8;
  };

  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "TB", nodesep: 40, ranksep: 70, edgesep: 20 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of names) g.setNode(n, { width: size(n).width + 2 * loopRoom(n), height: size(n).height });
  edges.forEach((e, i) => {
    if (kinds[i] !== "forward") return;
    const text = label(e);
    g.setEdge(e.from, e.to, text ? { width: labelWidth(text), height: LABEL_HEIGHT } : { width: 0, height: 0 }, `e${i}`);
  });
  dagre.layout(g);

  const center = (n: string): Point => ({ x: g.node(n).x, y: g.node(n).y });
  const routed: { points: Point[]; path: string; labelX: number; labelY: number }[] = new Array(edges.length);

  // Forward edges: dagre's points.
  edges.forEach((e, i) => {
    if (kinds[i] !== "forward") return;
    const de = g.edge(e.from, e.to, `e${i}`) as { points: Point[]; x?: number; y?: number };
    const points = de.points.map((p) => ({ x: p.x, y: p.y }));
    // dagre ends the edge on the box it laid out, which is wider than the
    // role when the role has a self-loop: end it on the role as drawn.
    if (points.length >= 2) {
      points[0] = intersect(center(e.from), size(e.from), points[1]);
      points[points.length - 1] = intersect(center(e.to), size(e.to), points[points.length - 2]);
    }
    const mid = points[Math.floor(points.length / 2)];
    routed[i] = { points, path: smoothPath(points), labelX: de.x ?? mid.x, labelY: de.y ?? mid.y };
  });

  // Self-loops: nested loops on the role's left, labels further left.
  for (const [n, list] of loops) {
    const c = center(n);
    const { width, height } = size(n);
    list.forEach((i, k) => {
      const reach = LOOP_REACH + 14 * k;
      const x0 = c.x - width / 2;
      const [y0, y1] = [c.y - height / 4, c.y + height / 4];
      const points = [{ x: x0, y: y0 }, { x: x0 - reach, y: y0 - 14 }, { x: x0 - reach, y: y1 + 14 }, { x: x0, y: y1 }];
      const path = `M${x0},${y0} C${x0 - reach * 1.33},${y0 - 20} ${x0 - reach * 1.33},${y1 + 20} ${x0},${y1}`;
      const text = label(edges[i]);
      routed[i] = { points, path, labelX: x0 - reach - 4 - (text ? labelWidth(text) / 2 : 0), labelY: c.y };
    });
  }

  // Back-edges: lanes right of everything their span passes, the shortest
  // innermost; each lane right of the lanes it overlaps, with room for its
  // label, which sits on the lane.
  const backs = edges.map((_, i) => i).filter((i) => kinds[i] === "back");
  const span = (i: number) => {
    const [a, b] = [center(edges[i].to).y, center(edges[i].from).y];
    return { top: Math.min(a, b), bottom: Math.max(a, b) };
  };
  const rightOf = (top: number, bottom: number) => {
    let x = -Infinity;
    for (const n of names) {
      const p = center(n);
      const h = size(n).height / 2;
      if (p.y + h >= top && p.y - h <= bottom) x = Math.max(x, p.x + size(n).width / 2);
    }
    edges.forEach((e, i) => {
      if (kinds[i] !== "forward") return;
      const r = routed[i];
      for (const p of r.points) if (p.y >= top && p.y <= bottom) x = Math.max(x, p.x);
      const text = label(e);
      if (text && r.labelY + LABEL_HEIGHT / 2 >= top && r.labelY - LABEL_HEIGHT / 2 <= bottom) x = Math.max(x, r.labelX + labelWidth(text) / 2);
    });
    return x;
  };
  const lanes: { top: number; bottom: number; right: number }[] = [];
  backs.sort((a, b) => span(a).bottom - span(a).top - (span(b).bottom - span(b).top) || a - b);
  // Where back-edges meet a role's right side, spread over its height.
  const ends = new Map<string, number[]>();
  for (const i of backs) {
    for (const n of [edges[i].from, edges[i].to]) ends.set(n, [...(ends.get(n) ?? []), i]);
  }
  const attachY = (n: string, i: number, leaving: boolean) => {
    const list = ends.get(n)!;
    const slots: string[] = [];
    for (const j of list) {
      if (edges[j].from === n) slots.push(`${j}>`);
      if (edges[j].to === n) slots.push(`${j}<`);
    }
    const k = slots.indexOf(`${i}${leaving ? ">" : "<"}`);
    const h = size(n).height;
    return center(n).y - h / 2 + (h * (k + 1)) / (slots.length + 1);
  };
  for (const i of backs) {
    const e = edges[i];
    const { top, bottom } = span(i);
    const text = label(e);
    const half = text ? labelWidth(text) / 2 : 0;
    let x = rightOf(top, bottom);
    for (const l of lanes) if (l.top <= bottom && l.bottom >= top) x = Math.max(x, l.right);
    const lane = x + LANE_GAP + half;
    lanes.push({ top, bottom, right: lane + half });
    const s = { x: center(e.from).x + size(e.from).width / 2, y: attachY(e.from, i, true) };
    const t = { x: center(e.to).x + size(e.to).width / 2, y: attachY(e.to, i, false) };
    const points = [s, { x: lane, y: s.y }, { x: lane, y: t.y }, t];
    routed[i] = { points, path: orthoPath(points), labelX: lane, labelY: (s.y + t.y) / 2 };
  }

  const nodes: FlowNode<GraphNodeData>[] = [...names].map((n) => {
    const p = center(n);
    const terminal = n === START || n === END;
    const { width, height } = size(n);
    const on = active === n;
    return {
      id: n,
      position: { x: p.x - width / 2, y: p.y - height / 2 },
      data: { label: terminal ? (n === START ? "start" : "end") : n, kind: terminal ? "terminal" : "role", description: roles[n]?.description, active: on, waiting: on && waiting },
      type: n === START ? "input" : n === END ? "output" : "default",
      className: `gnode ${terminal ? "gnode-terminal" : "gnode-role"}${on ? " gnode-active" : ""}${on && waiting ? " gnode-waiting" : ""}`,
      // A paused thread's next role: a dashed ring (it is not running).
      style: { width, height, ...(on && waiting ? { outline: "3px dashed var(--accent)", outlineOffset: 2, boxShadow: "none" } : {}) },
      width,
      height,
      draggable: false,
      connectable: false,
    };
  });
  const counts = takenCounts(opts.taken ?? []);
  const flowEdges: FlowEdge<GraphEdgeData>[] = edges.map((e, i) => {
    const fallback = e.condition === FALLBACK;
    const times = counts.get(i) ?? 0;
    const went = times > 0;
    const style = { ...(fallback ? { strokeDasharray: "6 4" } : {}), ...(went ? { stroke: "var(--visited)", strokeWidth: 3 } : {}) };
    const text = label(e);
    return {
      id: `e${i}-${e.from}-${e.to}`,
      type: EDGE_TYPE,
      source: e.from,
      target: e.to,
      label: text || undefined,
      data: { condition: e.condition, description: e.conditionDescription ?? null, kind: kinds[i], ...routed[i], visited: went, times },
      animated: false,
      className: `gedge gedge-${kinds[i]}${fallback ? " gedge-fallback" : ""}${went ? " gedge-visited" : ""}`,
      style: Object.keys(style).length ? style : undefined,
      markerEnd: went ? { type: MarkerType.ArrowClosed, color: "#1f8a4c" } : { type: MarkerType.ArrowClosed },
      zIndex: went ? 1 : 0,
    };
  });
  return { nodes, edges: flowEdges };
}
