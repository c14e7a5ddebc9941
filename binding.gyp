{
  "targets": [
    {
      "target_name": "agent_r1_native",
      "sources": ["native/agent_r1_native.c"],
      "cflags": ["-O3", "-std=c99", "-Wall", "-Wextra"],
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
