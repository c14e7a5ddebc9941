export * from "./util/errors.js";
