export {
  startDashboard,
  checkRunDir,
  chartJsPath,
  DEFAULT_HOST,
  DEFAULT_PORT,
  type Dashboard,
  type DashboardOptions,
} from "./server.js";
export { JsonlTail, type JsonRecord } from "./jsonl-tail.js";
export { readSamples, sampleIterations, type SampleFile } from "./samples.js";
