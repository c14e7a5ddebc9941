/** Every Env, Tool and tool-call format in the project runs its conformance suite here. */
import { z } from "zod";
import { ToolEnv } from "../src/agent/tool-env.js";
import { defineTool } from "../src/agent/tool.js";
import { createHermesFormat, hermesFormat } from "../src/agent/formats/hermes.js";
import { llama3JsonFormat } from "../src/agent/formats/llama3.js";
import { envConformance, toolConformance, formatConformance } from "../src/testing/index.js";
import { calculator } from "../examples/agent/calculator-tool.js";
import { lookup } from "../examples/agent/lookup-tool.js";
import { GuessNumberEnv } from "../examples/agent/guess-number-env.js";

formatConformance(hermesFormat);
formatConformance(createHermesFormat({ results: "user" }));
formatConformance(llama3JsonFormat);

toolConformance(calculator, {
  valid: [{ expression: "12 * (3 + 4)" }, { expression: "-1.5/3" }],
  invalid: [{ expression: 12 }, {}, { expression: "1".repeat(201) }],
});
toolConformance(lookup, {
  valid: [{ title: "Kalomi" }, { title: "Nowhere" }],
  invalid: [{ title: "" }, { name: "Kalomi" }],
  row: { reward_model: { ground_truth: "Lusk" } },
});

const rows = [
  { prompt: [{ role: "user", content: "What is 12 * (3 + 4)?" }], reward_model: { ground_truth: "84" } },
  {
    prompt: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Where was the founder of Kalomi born?" },
    ],
    reward_model: { ground_truth: "Lusk" },
  },
];
const outcomeReward = ({ answer, groundTruth }: { answer: string | undefined; groundTruth: unknown }) =>
  Number(answer === groundTruth);

envConformance("ToolEnv (hermes)", () => new ToolEnv({ tools: [calculator, lookup], outcomeReward }), {
  rows,
  actions: [
    [
      hermesFormat.write({ name: "lookup", arguments: { title: "Kalomi" } }),
      hermesFormat.write({ name: "calculator", arguments: { expression: "1+1" } }),
    ].join("\n"),
    hermesFormat.write({ name: "calculator", arguments: { expression: "(" } }),
    "<answer>84</answer>",
  ],
});

envConformance(
  "ToolEnv (hermes, results as one user message)",
  () => new ToolEnv({ tools: [calculator], format: createHermesFormat({ results: "user" }), outcomeReward }),
  {
    rows,
    actions: [hermesFormat.write({ name: "calculator", arguments: { expression: "2*3" } }), "<answer>6</answer>"],
  },
);

envConformance(
  "ToolEnv (llama3_json)",
  () => new ToolEnv({ tools: [calculator, lookup], format: llama3JsonFormat, outcomeReward }),
  {
    rows,
    actions: [llama3JsonFormat.write({ name: "lookup", arguments: { title: "Ada Brenn" } }), "<answer>Lusk</answer>"],
  },
);

envConformance("GuessNumberEnv (example)", () => new GuessNumberEnv(), {
  rows: [
    { secret: 7, max: 10 },
    { secret: 1, max: 3 },
  ],
  actions: ["<guess>5</guess>", "no guess", "<guess>8</guess>", "<guess>7</guess>"],
});

// The tools the agent tests define inline run it too.
toolConformance(
  defineTool({
    name: "calc",
    description: "Multiplies two integers written as a*b.",
    inputSchema: z.object({ expression: z.string() }),
    execute: ({ expression }) =>
      String(
        expression
          .split("*")
          .map(Number)
          .reduce((a, b) => a * b),
      ),
  }),
  { valid: [{ expression: "6*7" }], invalid: [{ expression: ["6", "7"] }] },
);
