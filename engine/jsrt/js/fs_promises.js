// node:fs/promises — the promise half of node:fs.
"use strict";
module.exports = require("fs").promises;
