"""What the tests share, in one place: a test module imports its helpers from here, never from
another test module, and nothing outside tests/ imports them (tests/house/test_layout.py checks both).

References and bounds, written independently of attn_ref:
    reference                    attention in float64 NumPy, ``as64``, the machine epsilons
    float32_attention_bounds     how far float32 attention may be from it (first order, closed form)
    worst_case_rounding          ``Rounded``: worst-case float32 rounding carried step by step
    transformer_block_reference  a transformer block in float64, with its rounding at unit roundoff u
    positions_reference          the sinusoidal encoding and RoPE, and their rounding
    linear_as_attention_bound    the linear-as-attention page's error bound, the blog post's draws
    backward_reference           attention's gradients in float64, and their error bounds
    compression_reference        multi-head latent and linear attention in float64, their tolerances
    delta_rule_reference         the delta rule as its papers write it, in float64, and its rounding
    sparse_reference             block-sparse attention and its selections, one query at a time
    sentence                     the core path's running example (Alice met Bob she) in float64
    training_claims              what the tutorials claim about their trained models, checked per seed
    strategies, allocations      hypothesis's drawn inputs; the tensors a computation creates

What was printed or shown, and how it ran:
    printed                      numbers read back from printed text, and compared in order
    shown, snippets, forked      an executed tutorial and what its cells showed; a snippet run on
                                 its own in a fresh process
    built_site, readers          the built site; the browser tests' screens and screenshots
"""
