/// <reference types="vitest/config" />
import { defineConfig } from "vite";

// The dashboard is served by the gateway from its embedded dist/ under any
// prefix, so every asset URL is relative; the API is same-origin (/api/...).
export default defineConfig({
  base: "./",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1024,
    rollupOptions: {
      // @xyflow/react starts with "use client", which means nothing here.
      onwarn(warning, warn) {
        if (warning.code === "MODULE_LEVEL_DIRECTIVE") return;
        warn(warning);
      },
    },
  },
  server: { proxy: { "/api": "http://127.0.0.1:8080" } },
  // A test waits for the page to settle, never for a time; the generous
  // limit only keeps a busy machine (make test runs the Go build beside
  // this) from failing a test that is merely slow.
  test: { environment: "jsdom", include: ["src/**/*.test.ts", "src/**/*.test.tsx"], testTimeout: 30_000 },
});
