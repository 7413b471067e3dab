// A kernel that includes a model header: the layering check must reject it.
#include "models/model.h"
