"""TensorFlow's private Python modules (`tensorflow.python.*`), used here and nowhere else.

Some of what the workbench must do has no public TensorFlow API: freezing a function the way
TF-TRT froze it, running Grappler on a GraphDef, turning FunctionDefs into GraphDefs and back.
TF-TRT itself (TensorFlow's `trt_convert.py`) did it through these same modules. Each need has
one module here, which says why; `tests/test_layers.py` fails when any other module of the
package imports `tensorflow.python`, so a change of TensorFlow's internals breaks one place.

    freezing.py   variables to Consts (`convert_to_constants`), TF-TRT's freezing
    grappler.py   Grappler on a GraphDef: optimize, item (shapes), a virtual cluster
    function_defs.py  FunctionDefs <-> GraphDefs, the op registry
    eager.py      the eager context: registered functions, the device scope
    tftrt.py      TensorFlow's own TF-TRT (TensorFlow <= 2.17 built with TensorRT), and the
                  saved-model `save` module its `save()` wrote through
"""
