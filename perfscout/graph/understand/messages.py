"""What the parser says: its questions and notes, in English and Chinese."""

from __future__ import annotations

from typing import Any

from perfscout.state.intent import Intent

# ---------------------------------------------------------------------------- questions

MESSAGES = {
    "en": {
        "clause": "I did not understand \"{detail}\", and none of my tools does that (I can: compare and evaluate "
                  "compressors, find the best ratio or the fastest setting, sweep a spec, profile a program, "
                  "diagnose a profile, describe this machine). Answer 'ignore' to go on without it, or say it "
                  "another way.",
        "question": "What should I find out, and on which data? For example: 'compare sz3 and zfp at rel 1e-3 on "
                    "vorticity.512_512', 'which codec gives the best ratio on FILE at abs 1e-4?', "
                    "'profile `./app` and tell me what limits it'.",
        "codecs_unknown": "\"{detail}\" is not a codec I know. Did you mean {cands}? (codecs here: {known})",
        "codecs": "Which compressor(s)? Usable here: {known}; or 'all'.",
        "codecs_foreign": "\"{detail}\" ({name}) is not a compressor perfscout can run: it has no wrapper for it, so "
                          "it is not installed here. Answer 'ignore' to go on without it, or name one to use instead "
                          "(usable here: {known}).",
        "codecs_not_known": "\"{detail}\" is not a compressor I know, and none by that name is installed here. Which "
                            "one should I use: {known}? (or 'all')",
        "codec_foreign_note": "{name} was asked for, but perfscout has no wrapper for it (not installed here)",
        "data_unavailable": "The field {detail} ({description}) is not available here: {reason}. Which field should I "
                            "use instead: {cands}?",
        "mode": "Is {bounds} an absolute error bound ('abs'), relative to the value range ('rel'), or point-wise "
                "relative ('pw_rel')?",
        "bounds": "Which error bound? For example 'rel 1e-3' (relative to the value range), 'abs 1e-4', 'psnr 80' "
                  "or a list such as 'rel 1e-2, 1e-3, 1e-4'.",
        "bounds_mode": "Which {mode} bound(s)? For example 1e-3, or 1e-2, 1e-3, 1e-4.",
        "bounds_count": "Which {n} error bound(s)? Answer 'yes' for {mode} {series}, or name them (e.g. 'abs 1e-2, "
                        "1e-3, 1e-4').",
        "unsupported": "{reason}. Which should I use instead: {cands}? For example 'abs 1e-3' or 'rel 1e-3'.",
        "unsupported_fixed_precision": "{reason}. ZFP's fixed-accuracy mode is perfscout's 'abs' (the tolerance is the "
                                       "bound, and it is checked). Which should I use instead: {cands}? For example "
                                       "'abs 1e-3', 'rel 1e-3' or 'fixed_rate 16' (bits per value).",
        "profiler_named": "the request names {tool}: the profile step picks the profiler itself (Nsight Compute for a "
                          "CUDA program where ncu and a GPU are here, perf stat otherwise); `perfscout profile --tool "
                          "ncu -- CMD` forces one",
        "masked_nan": "missing values as asked: a variable's masked points and any NaN/Inf are kept aside "
                      "(losslessly, beside the stream) and only the valid values are compressed and checked",
        "masked_fill": "missing values as asked: a variable's masked points are filled with {value}, then "
                       "compressed and checked like data",
        "synthetic_kind": "a synthetic field of no named kind: a Gaussian random field ({kind}) is generated",
        "synthetic_shape": "no shape given for the synthetic {kind} field: using {shape}",
        "nxyz_order": "nx/ny/nz read in C order (slowest axis first): {shape}",
        "rates_as_settings": "no error bound named: run at {rates} bits/value (fixed_rate mode)",
        "units": "the bound is in the field's own units ({unit}), taken as given: perfscout does not convert units",
        "zfp_tolerance": "zfp's tolerance is its fixed-accuracy mode: measured as an absolute bound (abs)",
        "dataset_context": "\"{word}\" (read as context: the data named is {data})",
        "data_repeated": "{data} is named {times} times: it is evaluated once",
        "two_requests": "The request asks for two things: to {first}, and a measurement of compressors ({rest}). One "
                        "run does one of them: answer 'ignore' to {first} only, and ask for the measurement in a run of "
                        "its own.",
        "two_questions": "The request also asks \"{clause}\", a question of its own (it describes this machine). One "
                         "run answers one: answer 'ignore' to go on with the measurement ({first}), and ask it in a "
                         "run of its own.",
        "two_modes": "The request names two error modes ({cands}); one run measures every codec in one mode. Which "
                     "one: {cands}?",
        "typo_read": "\"{word}\" read as {meant}",
        "repeats_zero": "\"{written}\" is not a number of timed runs: the default (3) is used",
        "profiler_not_run": "the request names {tool}, which perfscout does not run: it profiles with Nsight Compute "
                            "(a CUDA program where ncu and a GPU are here) or perf stat",
        "metrics_reported": "{metrics}: in every result's figures (the report's table and details)",
        "metric_reported": "{metric} is reported for every result (named without a number, it is a figure to show, "
                           "not the error mode)",
        "data": "Which data? Fields known here: {known}; or a file path (netCDF/HDF5/Zarr with its variable, or a "
                "raw file with its shape and dtype), or synthetic:KIND:SHAPE such as synthetic:grf:64,64.",
        "data_which": "Which field did you mean by \"{detail}\": {cands}?",
        "data_typo": "\"{detail}\" is not a field I know. Did you mean {cands}?",
        "data_absent": "The file {detail} does not exist here. Which file should I use instead?",
        "shape_guess": "The file {detail} has {size:,} bytes: is it {guess}? (answer 'yes', or give the shape and "
                       "dtype, e.g. '512x512 float32')",
        "shape": "The file {detail} has {size:,} bytes: what are its shape (C order, slowest axis first) and element "
                 "type (float32 or float64)? e.g. '512x512 float32'.",
        "dtype": "Is {detail} float32 or float64?",
        "var": "Which variable of {detail}: {cands}?",
        "var_unknown": "{detail} has no variable \"{var}\". Which one: {cands}?",
        "command": "Which program should I profile? Put the command in backticks, e.g. profile `./app --size 4096`.",
        "profile_file": "Which profile file? An Nsight Compute report (.ncu-rep), its CSV export, or a perf stat CSV.",
        "profile_absent": "The profile file {detail} does not exist here. Which file should I read?",
        "sweep": "Which sweep spec (a YAML file such as examples/sweep_quick.yaml)?",
        "runs": "Which two runs should I compare? Give the baseline and the candidate (run ids or run directories).",
        "cancelled_at": "the run was cancelled when asked: {question}",
        "user_ignored": "\"{detail}\" (the user chose to go on without it)",
        "answer_empty": "the answer was empty.",
        "answer_unused": "I could not use the answer {text!r}.",
        "size_gives_dtype": "{name}: {size} bytes = {shape} x {itemsize} bytes, so {dtype}",
        "one_variable": "{name} has one variable, {var}: using it",
        "all_codecs": "no compressor named: every usable one is compared",
        "target_as_setting": "no error bound named: each codec is run at the target {target} ({mode} mode)",
        "shape_unused": "shape {shape} (no raw file to apply it to)",
        "dtype_kept": "dtype {dtype} noted; a registry field keeps its own dtype",
        "codec_not_here": "{codec} is not a codec of this installation",
        "too_long": "the request is {size:,} characters long, and perfscout reads requests of at most {limit:,} characters "
                    "(a request is words; put long details in a spec file: perfscout run --spec FILE)",
    },
    "zh": {
        "clause": "我没有理解“{detail}”，而且我的工具都不做这件事（我可以：比较和评估压缩器、找压缩比最高或最快的设置、运行 sweep、"
                  "剖析一个程序、诊断 profile 文件、描述这台机器）。回答“忽略”跳过它继续，或者换一种说法。",
        "question": "要测什么、用哪份数据？例如：“在 vorticity.512_512 上用相对误差 1e-3 比较 sz3 和 zfp”。",
        "codecs_unknown": "我不认识压缩器“{detail}”。您是指 {cands} 吗？（这里可用：{known}）",
        "codecs": "用哪个（些）压缩器？这里可用：{known}；或者回答“全部”。",
        "codecs_foreign": "“{detail}”（{name}）不是 perfscout 能运行的压缩器：没有它的封装，这里也没有安装。回答“忽略”跳过它继续，"
                          "或者换一个（这里可用：{known}）。",
        "codecs_not_known": "我不认识压缩器“{detail}”，这里也没有叫这个名字的压缩器。用哪个：{known}？（或者“全部”）",
        "codec_foreign_note": "请求里有 {name}，但 perfscout 没有它的封装（这里未安装）",
        "data_unavailable": "场 {detail}（{description}）在这里不可用：{reason}。改用哪个场：{cands}？",
        "mode": "{bounds} 是绝对误差界（abs）、相对于值域的误差界（rel），还是逐点相对误差（pw_rel）？",
        "bounds": "误差界是多少？例如“相对误差 1e-3”、“绝对误差 1e-4”、“psnr 80”，或一组值“rel 1e-2, 1e-3, 1e-4”。",
        "bounds_mode": "{mode} 误差界取多少？例如 1e-3，或 1e-2, 1e-3, 1e-4。",
        "bounds_count": "用哪 {n} 个误差界？回答“是”就用 {mode} {series}，或者直接给出（例如“abs 1e-2, 1e-3, 1e-4”）。",
        "unsupported": "{reason}。改用哪一种：{cands}？例如“abs 1e-3”或“rel 1e-3”。",
        "unsupported_fixed_precision": "{reason}。ZFP 的固定准确度模式就是 perfscout 的 abs（容差即误差界，并会被检查）。"
                                       "改用哪一种：{cands}？例如“abs 1e-3”、“rel 1e-3”或“fixed_rate 16”（每个值的位数）。",
        "profiler_named": "请求里提到了 {tool}：剖析步骤会自己选择剖析器（有 ncu 和 GPU 时对 CUDA 程序用 Nsight Compute，否则用 "
                          "perf stat）；`perfscout profile --tool ncu -- CMD` 可以指定",
        "synthetic_kind": "没有指明合成场的类型：生成高斯随机场（{kind}）",
        "masked_nan": "缺测/被掩码的点和 NaN/Inf 按请求放在一边（无损地存在压缩流旁边），只压缩和检查有效值",
        "masked_fill": "变量被掩码的点（缺测/填充值）按请求填成 {value}，之后和数据一样被压缩和检查",
        "synthetic_shape": "合成场 {kind} 没有给出形状：使用 {shape}",
        "nxyz_order": "nx/ny/nz 按 C 顺序（最慢的轴在前）读取：{shape}",
        "rates_as_settings": "没有给出误差界：以每个值 {rates} 位运行（fixed_rate 模式）",
        "units": "误差界按场本身的单位（{unit}）理解：perfscout 不做单位换算",
        "zfp_tolerance": "zfp 的容差就是它的固定准确度模式：按绝对误差界（abs）测量",
        "dataset_context": "“{word}”（当作背景：指定的数据是 {data}）",
        "data_repeated": "{data} 出现了 {times} 次：只评估一次",
        "two_requests": "这个请求要做两件事：{first}，以及测量压缩器（{rest}）。一次运行只做一件：回答“忽略”只做 {first}，"
                        "测量请另起一次运行。",
        "two_questions": "这个请求还问了“{clause}”，这是另一个问题（描述这台机器）。一次运行只回答一个：回答“忽略”继续测量（{first}），"
                         "这个问题请另起一次运行。",
        "two_modes": "请求里有两种误差模式（{cands}）；一次运行对所有压缩器用同一种模式。用哪一种：{cands}？",
        "typo_read": "“{word}”按 {meant} 理解",
        "repeats_zero": "“{written}”不是计时次数：使用默认的 3 次",
        "profiler_not_run": "请求里提到了 {tool}，perfscout 不运行它：剖析用 Nsight Compute（有 ncu 和 GPU 时的 CUDA 程序）或 perf stat",
        "metrics_reported": "{metrics}：每个结果的指标里都有（报告的表格和详情）",
        "metric_reported": "每个结果都会报告 {metric}（没有数值时它是要看的指标，不是误差模式）",
        "data": "用哪份数据？这里已知的场：{known}；或者一个文件路径（netCDF/HDF5/Zarr 加变量名，或原始二进制文件加形状和类型），"
                "或 synthetic:KIND:SHAPE，例如 synthetic:grf:64,64。",
        "data_which": "“{detail}”指的是哪个场：{cands}？",
        "data_typo": "我不认识数据“{detail}”。您是指 {cands} 吗？",
        "data_absent": "文件 {detail} 在这里不存在。应该用哪个文件？",
        "shape_guess": "文件 {detail} 有 {size:,} 字节：它是 {guess} 吗？（回答“是”，或给出形状和类型，例如“512x512 float32”）",
        "shape": "文件 {detail} 有 {size:,} 字节：它的形状（C 顺序，最慢的轴在前）和元素类型（float32 或 float64）是什么？例如“512x512 float32”。",
        "dtype": "{detail} 是 float32 还是 float64？",
        "var": "用 {detail} 里的哪个变量：{cands}？",
        "var_unknown": "{detail} 里没有变量“{var}”。用哪个：{cands}？",
        "command": "要剖析哪个程序？请把命令放在反引号里，例如：剖析 `./app --size 4096`。",
        "profile_file": "哪个 profile 文件？Nsight Compute 报告（.ncu-rep）、它导出的 CSV，或 perf stat 的 CSV。",
        "profile_absent": "profile 文件 {detail} 在这里不存在。应该读哪个文件？",
        "sweep": "用哪个 sweep 配置（YAML 文件，例如 examples/sweep_quick.yaml）？",
        "runs": "比较哪两次运行？请给出基线和候选（运行 id 或运行目录）。",
        "cancelled_at": "在提问时运行被取消：{question}",
        "user_ignored": "“{detail}”（用户选择不管它继续）",
        "answer_empty": "回答是空的。",
        "answer_unused": "无法使用回答 {text!r}。",
        "size_gives_dtype": "{name}：{size} 字节 = {shape} × {itemsize} 字节，所以是 {dtype}",
        "one_variable": "{name} 只有一个变量 {var}：使用它",
        "all_codecs": "没有指定压缩器：比较所有可用的压缩器",
        "target_as_setting": "没有给出误差界：每个压缩器都以目标 {target} 运行（{mode} 模式）",
        "shape_unused": "形状 {shape}（没有原始文件可用）",
        "dtype_kept": "已记下类型 {dtype}；数据集里的场保持它自己的类型",
        "codec_not_here": "{codec} 不是这里安装的压缩器",
        "too_long": "请求有 {size:,} 个字符，perfscout 只读取不超过 {limit:,} 个字符的请求（请求是文字；较长的细节请写进 spec 文件：perfscout run --spec FILE）",
    },
}


def say(intent: Intent, key: str, **kw: Any) -> str:
    return MESSAGES[intent.language][key].format(**kw)


def say_language(language: str, key: str, **kw: Any) -> str:
    return MESSAGES["zh" if language == "zh" else "en"][key].format(**kw)


