{
  "targets": [
    {
      "target_name": "agent_r1_native",
      "sources": ["native/agent_r1_native.c", "native/fused_ops.c", "native/train_ops.c", "native/napi_args.c", "native/parallel.c"],
      "cflags": ["-O3", "-std=c99", "-fno-trapping-math", "-fno-math-errno", "-Wall", "-Wextra", "-pthread"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["OS=='mac'", {
          "libraries": ["-framework Accelerate"],
          "xcode_settings": { "OTHER_CFLAGS": ["-O3"] }
        }, {
          "defines": ["AGENT_R1_OPENBLAS"],
          "libraries": ["-lopenblas"]
        }]
      ]
    }
  ]
}
