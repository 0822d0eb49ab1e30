import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { takeTokenFromLink } from "./api";
import { App } from "./App";
import "./style.css";

// Before the first render: the app reads the stored token and routes on the
// hash, which a login link's #token= is not.
takeTokenFromLink();

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
