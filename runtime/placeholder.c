/* replaced by the runtime */ int tfm_rt_placeholder;
