import { test } from "node:test";
import assert from "node:assert/strict";
import { ModelFormatError, formatError } from "../src/util/errors.js";

test("ModelFormatError names the file and the field", () => {
  const e = new ModelFormatError("m/config.json", "hidden_size", "must be a positive integer");
  assert.equal(formatError(e), "error: m/config.json (hidden_size): must be a positive integer");
});
