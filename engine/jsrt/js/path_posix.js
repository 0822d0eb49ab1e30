// node:path/posix — the same module as node:path on this host.
"use strict";
module.exports = require("path");
